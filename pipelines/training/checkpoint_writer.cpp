#include "training/checkpoint_writer.h"

#include <chrono>

#include "oml/common/error.h"
#include "oml/common/failpoint.h"
#include "oml/common/logging.h"
#include "oml/io/atomic_file.h"
#include "oml/io/pending_files.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

// `bytes`, already in `written`, also under `path`: a hard link renamed into place (no second
// write of the same bytes), or where the file system has no hard links, an atomic copy.
void place_same_bytes(const fs::path& written, const fs::path& path, const std::string& bytes) {
  const fs::path tmp = io::temporary_sibling(path);
  const io::PendingFile pending(tmp);
  std::error_code ec;
  fs::create_hard_link(written, tmp, ec);
  if (ec) {
    io::write_file_atomic(path, bytes);
    return;
  }
  try {
    failpoint("before_rename:" + path.filename().string());
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  io::publish([&] { fs::rename(tmp, path, ec); });
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw RuntimeError("cannot move '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
  }
}

}  // namespace

CheckpointWriter::CheckpointWriter(fs::path folder, std::function<void(const fs::path&)> on_written)
    : folder_(std::move(folder)), on_written_(std::move(on_written)) {
  thread_ = std::thread([this] { run(); });
}

CheckpointWriter::~CheckpointWriter() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();  // after the job in flight: it is the run's latest state
}

void CheckpointWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return job_.has_value() || stopping_; });
    if (!job_) return;
    // The training thread leaves job_ alone until it is reset (write() waits for that).
    lock.unlock();
    std::string error;
    try {
      write_job(*job_);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (!error.empty()) {
      failure_ = error;
      failed_ = true;
    }
    job_.reset();
    changed_.notify_all();
  }
}

void CheckpointWriter::write_job(Job& job) {
  OML_ASSERT(!job.files.empty(), "a checkpoint job names no file");
  const fs::path first = folder_ / job.files.front();
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::to_string(std::chrono::duration<double>(Clock::now() - t).count());
  };
  const auto start = Clock::now();
  std::string bytes;
  try {
    bytes = io::checkpoint_bytes(job.checkpoint);
    job.checkpoint = io::Checkpoint();  // the snapshot's memory back before the disk is waited on
    const auto serialised = Clock::now();
    io::write_file_atomic(first, bytes);
    log::debug("checkpoint " + first.string() + ": " + std::to_string(bytes.size() >> 20) +
               " MiB serialised in " +
               std::to_string(std::chrono::duration<double>(serialised - start).count()) +
               " s, written and synced in " + seconds_since(serialised) + " s (writer thread)");
  } catch (const std::exception& e) {
    throw RuntimeError("writing checkpoint '" + first.string() + "' failed: " + e.what());
  }
  on_written_(first);
  const auto remove_dropped = [&] {
    for (const std::string& name : job.remove) {
      std::error_code ec;  // one already gone (removed by hand) is no failure
      fs::remove(folder_ / name, ec);
    }
  };
  for (std::size_t i = 1; i < job.files.size(); ++i) {
    const fs::path path = folder_ / job.files[i];
    if (i + 1 == job.files.size()) remove_dropped();  // before the commit point, as the snapshot says
    try {
      place_same_bytes(first, path, bytes);
    } catch (const std::exception& e) {
      throw RuntimeError("writing checkpoint '" + path.string() + "' failed: " + e.what());
    }
    on_written_(path);
  }
  if (job.files.size() == 1) remove_dropped();
}

void CheckpointWriter::wait_idle(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return !job_.has_value(); });
}

void CheckpointWriter::check() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  throw RuntimeError(failure_ + "; training stopped (the checkpoints written before it are whole)");
}

void CheckpointWriter::wait() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle(lock);
  }
  check();
}

void CheckpointWriter::write(const std::function<Job()>& snapshot) {
  wait();
  Job job = snapshot();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
  }
  changed_.notify_all();
}

}  // namespace oml::pipelines
