#include "oml/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "oml/common/error.h"

namespace oml::io {

namespace fs = std::filesystem;

fs::path temporary_sibling(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  return fs::path(path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

namespace {
void ensure_parent(const fs::path& path) {
  if (!path.has_parent_path()) return;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw RuntimeError("cannot create folder '" + path.parent_path().string() + "': " + ec.message());
}

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void commit(const fs::path& tmp, const fs::path& path) {
  fsync_path(tmp);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw RuntimeError("cannot move '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
  }
}
}  // namespace

void write_stream_atomic(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  ensure_parent(path);
  const fs::path tmp = temporary_sibling(path);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeError("cannot write '" + tmp.string() + "': " + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw RuntimeError("writing '" + path.string() + "' failed (disk full?)");
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  commit(tmp, path);
}

void write_file_atomic(const fs::path& path, const std::string& bytes) {
  write_stream_atomic(
      path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void replace_directory(const fs::path& tmp, const fs::path& dst) {
  std::error_code ec;
  fs::path old;
  if (fs::exists(dst)) {
    old = temporary_sibling(dst);
    fs::rename(dst, old, ec);
    if (ec) throw RuntimeError("cannot move the existing '" + dst.string() + "' aside: " + ec.message());
  }
  fs::rename(tmp, dst, ec);
  if (ec) {
    if (!old.empty()) fs::rename(old, dst);  // put the previous version back
    throw RuntimeError("cannot move '" + tmp.string() + "' to '" + dst.string() + "': " + ec.message());
  }
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace oml::io
