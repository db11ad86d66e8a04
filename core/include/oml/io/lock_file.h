#pragma once
// An exclusive hold on a lock file, for folders that one process at a time writes: a run
// directory, a command's output folder, an index folder.
//
//   io::LockFile lock = io::LockFile::try_lock(dir / ".lock", "oml-train");
//   if (!lock.held()) throw UsageError(dir.string() + " is in use (pid " + lock.holder() + ")");
//   lock.write_pid();  // for the next one refused to name
//
// The hold is the kernel's flock, so a killed process never leaves a stale one. The file is
// opened without following a symbolic link and must be a regular file: a link could make the
// pid written into it truncate whatever it points to, and a FIFO would block the open.

#include <filesystem>
#include <string>

namespace oml::io {

class LockFile {
 public:
  /// Opens (creating it, mode 0644) and locks `file` without waiting. When another process
  /// holds it the result is not held() and holder() says what that process wrote (its pid).
  /// `maker` names the command that makes such files, for the messages: a symbolic link or
  /// anything but a regular file at `file` is a UsageError naming both ("remove it"); an open
  /// that fails otherwise is a RuntimeError with the system's reason. A holder may remove the
  /// file while holding it (remove_and_release): the lock is then taken on the file that is at
  /// the path afterwards.
  static LockFile try_lock(const std::filesystem::path& file, const std::string& maker);

  LockFile() = default;
  LockFile(LockFile&& other) noexcept;
  LockFile& operator=(LockFile&& other) noexcept;
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;
  /// Releases the hold; the file stays (see remove_and_release).
  ~LockFile();

  bool held() const { return fd_ >= 0; }
  /// What the process holding the file wrote into it, when this one is not held(); may be empty.
  const std::string& holder() const { return holder_; }
  const std::filesystem::path& path() const { return path_; }

  /// Replaces the file's contents with this process's pid (best effort: a lock is still a lock
  /// without it).
  void write_pid() const;
  /// Removes the file while still holding it, then releases: no other process can be holding
  /// the removed file, and one that opened it meanwhile takes the lock on the next one. (Safe
  /// because try_lock checks that the file it locked is still the one at the path.)
  void remove_and_release();

 private:
  std::filesystem::path path_;
  std::string holder_;
  int fd_ = -1;
};

}  // namespace oml::io
