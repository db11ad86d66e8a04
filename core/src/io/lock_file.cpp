#include "oml/io/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "oml/common/error.h"

namespace oml::io {

namespace fs = std::filesystem;

LockFile LockFile::try_lock(const fs::path& file, const std::string& maker) {
  LockFile lock;
  lock.path_ = file;
  // A holder that ends may remove the file while it still holds it (remove_and_release): a lock
  // taken on the removed file is taken again on the one now at the path.
  for (int attempt = 0;; ++attempt) {
    // O_NONBLOCK: a FIFO at the path must not block the open; it is refused below.
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0 && errno == ELOOP) {
      throw UsageError("'" + file.string() + "' is a symbolic link, which " + maker +
                       " never makes; remove it");
    }
    if (fd < 0 && errno == EISDIR) {
      throw UsageError("'" + file.string() + "' is a folder, where " + maker +
                       " keeps a lock file; remove it");
    }
    if (fd < 0) throw RuntimeError("cannot open '" + file.string() + "': " + std::strerror(errno));
    struct stat held {};
    if (::fstat(fd, &held) != 0 || !S_ISREG(held.st_mode)) {
      ::close(fd);
      throw UsageError("'" + file.string() + "' is not a file, which " + maker + " never makes; remove it");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char holder[32] = {0};
      const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
      ::close(fd);
      if (error != EWOULDBLOCK) {
        throw RuntimeError("cannot lock '" + file.string() + "': " + std::strerror(error));
      }
      lock.holder_ = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string();
      return lock;
    }
    struct stat at_path {};
    if (::stat(file.c_str(), &at_path) == 0 && at_path.st_ino == held.st_ino &&
        at_path.st_dev == held.st_dev) {
      lock.fd_ = fd;
      return lock;
    }
    ::close(fd);
    if (attempt == 10) throw RuntimeError("cannot lock '" + file.string() + "': it keeps being replaced");
  }
}

LockFile::LockFile(LockFile&& other) noexcept
    : path_(std::move(other.path_)), holder_(std::move(other.holder_)), fd_(other.fd_) {
  other.fd_ = -1;
}

LockFile& LockFile::operator=(LockFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    holder_ = std::move(other.holder_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

LockFile::~LockFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LockFile::write_pid() const {
  if (fd_ < 0) return;
  const std::string pid = std::to_string(::getpid());
  // Best effort: the hold is the flock, the pid only a courtesy to the process refused.
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

void LockFile::remove_and_release() {
  if (fd_ < 0) return;
  std::error_code ignored;
  fs::remove(path_, ignored);
  ::close(fd_);
  fd_ = -1;
}

}  // namespace oml::io
