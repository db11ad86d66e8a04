#pragma once
// Writes the Trainer's checkpoints on a thread of its own, so that training goes on while a
// checkpoint is serialised, written, fsynced and renamed into place (docs/training.md#checkpoints).
//
//   CheckpointWriter writer(paths.checkpoints, on_written);
//   writer.write([&] { return CheckpointWriter::Job{snapshot(), {"best.ckpt", "last.ckpt"}, {}}; });
//   ... training goes on; writer.check() after each step throws a failed write's error ...
//   writer.wait();  // at the end: every write is in place (or its error is thrown)
//
// One write at a time: write() waits for the one in flight before it takes the next snapshot, so
// at most one snapshot is held besides the model. A job writes its first file atomically
// (io::write_file_atomic: temporary, fsync, rename), then puts the same bytes under its other
// names in order (a hard link renamed into place; a copy where the file system has none). Its
// last file is the commit point, placed after the others and after the files the job removes:
// the Trainer names last.ckpt last, so that a run killed mid-job resumes from the previous
// last.ckpt and writes the job again, never from a last.ckpt whose best.ckpt or kept top-k
// files are still the earlier ones. A crash or a kill leaves every checkpoint whole, the
// previous one or the new one; an interrupt's cleanup removes the temporary of the write in
// flight.
//
// A job that fails (a full disk) fails the writer: check(), wait() and the next write() throw
// RuntimeError naming the file, and no further job runs. The destructor waits for the job in
// flight, so a run that ends by an error still leaves that checkpoint complete.

#include <atomic>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "oml/io/checkpoint.h"

namespace oml::pipelines {

class CheckpointWriter {
 public:
  struct Job {
    io::Checkpoint checkpoint;  ///< the state, in host memory the training does not touch
    /// File names in the folder: the first is written, the others get the same bytes, in order;
    /// the last is the commit point.
    std::vector<std::string> files;
    /// File names removed after the first file is written, before the last is placed (after it
    /// when the job has one file).
    std::vector<std::string> remove;
  };

  /// Writes into `folder` (created by the first job). `on_written(path)` is called on the
  /// writer's thread after each file is in place (the logger's copy of it); its exceptions count
  /// as the job's failure.
  CheckpointWriter(std::filesystem::path folder,
                   std::function<void(const std::filesystem::path&)> on_written);
  /// Waits for the job in flight, then stops the thread.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// Waits for the job in flight, throws if a job failed, then calls `snapshot` on this thread
  /// and hands its job to the writer's.
  void write(const std::function<Job()>& snapshot);
  /// Throws RuntimeError when a job has failed; returns at once otherwise (one atomic load).
  void check() const;
  /// Waits until no job is in flight, then check().
  void wait();

 private:
  void run();
  void write_job(Job& job);
  void wait_idle(std::unique_lock<std::mutex>& lock);

  std::filesystem::path folder_;
  std::function<void(const std::filesystem::path&)> on_written_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<Job> job_;  ///< handed over, not yet finished
  bool stopping_ = false;
  std::atomic<bool> failed_{false};
  std::string failure_;  ///< the failed job's message (under mutex_)
  std::thread thread_;
};

}  // namespace oml::pipelines
