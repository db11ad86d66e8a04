#include "oml/io/atomic_file.h"

#include <signal.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "oml/common/error.h"
#include "oml/common/failpoint.h"
#include "oml/io/pending_files.h"

namespace oml::io {

namespace fs = std::filesystem;

fs::path temporary_sibling(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  return fs::path(path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

namespace {

/// The pid of a temporary_sibling name ("x.ckpt.tmp-4242-0" -> 4242), or -1.
long temporary_owner(const std::string& file_name) {
  const std::size_t at = file_name.rfind(".tmp-");
  if (at == std::string::npos) return -1;
  const std::string rest = file_name.substr(at + 5);
  const std::size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || dash > 10) return -1;
  const std::string pid = rest.substr(0, dash), counter = rest.substr(dash + 1);
  const auto digits = [](const std::string& text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  };
  return digits(pid) && digits(counter) ? std::stol(pid) : -1;
}

bool process_alive(long pid) {
  return pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string entry_fingerprint(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "absent";
  // Not the device and inode: a copy or a move to another file system keeps neither.
  return std::to_string(st.st_size) + " " +
         std::to_string(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
}

int remove_stale_temporaries(const fs::path& folder, const std::string& name) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string file_name = entry.path().filename().string();
    if (!name.empty() && file_name.rfind(name + ".tmp-", 0) != 0) continue;
    const long owner = temporary_owner(file_name);
    if (owner <= 0 || process_alive(owner)) continue;
    std::error_code remove_error;
    if (fs::remove_all(entry.path(), remove_error) > 0 && !remove_error) ++removed;
  }
  return removed;
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
  publish([&] { fs::rename(tmp, path, ec); });
  if (ec) {
    std::error_code ignored;  // the rename's error is the one to report
    fs::remove(tmp, ignored);
    throw RuntimeError("cannot move '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
  }
}
}  // namespace

void write_path_atomic(const fs::path& path, const std::function<void(const fs::path& tmp)>& write) {
  ensure_parent(path);
  const fs::path tmp = temporary_sibling(path);
  const PendingFile pending(tmp);
  try {
    write(tmp);
    std::error_code ec;
    if (!fs::is_regular_file(tmp, ec)) throw RuntimeError("nothing was written to '" + tmp.string() + "'");
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  commit(tmp, path);
}

void write_stream_atomic(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  write_path_atomic(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeError("cannot write '" + tmp.string() + "': " + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw RuntimeError("writing '" + path.string() + "' failed (disk full?)");
    out.close();
    // Named after the output even when `path` is a staged temporary of it (CommandOutput::stage).
    std::string name = path.filename().string();
    if (temporary_owner(name) >= 0) name.erase(name.rfind(".tmp-"));
    failpoint("before_rename:" + name);
  });
}

void write_file_atomic(const fs::path& path, const std::string& bytes) {
  write_stream_atomic(
      path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void replace_directory(const fs::path& tmp, const fs::path& dst) {
  const fs::path old = fs::exists(dst) ? temporary_sibling(dst) : fs::path();
  // Once the swap is done the previous version is ours to remove, also by an interrupt.
  const PendingFile previous(old);
  std::string error;
  publish([&] {
    std::error_code ec;
    if (!old.empty()) {
      fs::rename(dst, old, ec);
      if (ec) {
        error = "cannot move the existing '" + dst.string() + "' aside: " + ec.message();
        return;
      }
    }
    fs::rename(tmp, dst, ec);
    if (ec) {
      std::error_code restore;
      if (!old.empty()) fs::rename(old, dst, restore);  // put the previous version back
      error = "cannot move '" + tmp.string() + "' to '" + dst.string() + "': " + ec.message();
    }
  });
  if (!error.empty()) throw RuntimeError(error);
  std::error_code ec;
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace oml::io
