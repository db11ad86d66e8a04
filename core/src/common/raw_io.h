#pragma once
// Bytes below the C++ streams, shared inside oml_core (not installed): fixed-width integers of
// binary formats, and writing to a file descriptor where a stream cannot be used (a signal's
// cleanup thread, forwarding a worker's output).

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace oml::detail {

/// The whole file at `path` (binary); nullopt when it cannot be opened or read. Callers say what
/// the file was for in their own error.
inline std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return out.str();
}

/// The big-endian uint32 at byte `at` of `bytes` (IDX files, PNG chunks); the caller has
/// checked that at + 4 <= bytes.size().
inline uint32_t big_endian_u32(const std::string& bytes, std::size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

/// Writes all of `text` to `fd`, retrying after EINTR; gives up quietly on any other error
/// (its callers have nowhere to report one).
inline void write_fully(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace oml::detail
