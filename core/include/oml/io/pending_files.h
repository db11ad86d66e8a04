#pragma once
// Files and folders this process has begun and not finished — an atomic write's temporary, a
// conversion's staging folder — so that an interrupt leaves nothing behind
// (docs/contracts.md#crash-safe-files):
//
//   io::install_interrupt_cleanup("oml-train");   // once, at the command's start
//   {
//     io::PendingFile pending(tmp);                 // before the first byte is written
//     ... write tmp ...
//     io::publish([&] { fs::rename(tmp, path); });  // never cut by the cleanup
//   }                                               // done: tmp is no longer ours to remove
//
// On SIGINT or SIGTERM the cleanup removes every pending path, prints one line and ends the
// process with 128 + the signal (130, 143). SIGKILL cannot be caught: what it leaves is removed
// by remove_stale_temporaries (atomic_file.h) when the run is resumed or the conversion repeated.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace oml::io {

/// Registers `path` (a file or a folder, existing or not yet) as this process's unfinished output
/// for its lifetime.
class PendingFile {
 public:
  explicit PendingFile(std::filesystem::path path);
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

 private:
  std::filesystem::path path_;
};

/// Work to do when an interrupt ends the process, before the pending files are removed: a
/// tracker marks its run KILLED. Registered for the hook's lifetime; hooks run on the cleanup's
/// thread in the order registered, with the signal's number, while other threads still run (so
/// a hook locks what it shares with them). A hook must be quick (a few seconds at most), must not
/// publish() or create a PendingFile, and its exceptions are swallowed.
class InterruptHook {
 public:
  explicit InterruptHook(std::function<void(int signo)> hook);
  ~InterruptHook();
  InterruptHook(const InterruptHook&) = delete;
  InterruptHook& operator=(const InterruptHook&) = delete;

 private:
  uint64_t id_;
};

/// Runs `step` (the renames that publish a result) so that an interrupt's cleanup happens
/// before or after it, never in the middle. `step` must not create a PendingFile.
void publish(const std::function<void()>& step);

/// Removes every pending path; returns how many existed. The interrupt cleanup calls it; exposed
/// for tests.
int remove_pending_files();

/// The signal whose cleanup is running (SIGINT, SIGTERM), 0 while none is: an interrupt hook that
/// records how the process ends (a tracker's exit code 128 + signal) reads it.
int interrupt_signal();

/// Returns at once, unless an interrupt's cleanup has begun: then it waits for the end of the
/// process. The command's edge calls it before it prints an error or exits, so that an error
/// caused by the cleanup itself (a worker thread's folder removed under it) is never reported.
void wait_if_interrupted();

/// While one lives, the first SIGINT or SIGTERM does not end the process: the watcher prints
/// "<command>: interrupted by signal 2 (SIGINT); <notice>" and notes the signal, which
/// deferred_interrupt() returns, so that the owner finishes a consistent piece of work (the
/// Trainer: the optimizer step under way, then last.ckpt) and ends the process itself with
/// end_deferred_interrupt(). A second signal ends it at once, as without a deferral; so does the
/// destruction of the last deferral while a signal is noted and not yet acted on. One per command
/// at a time.
class InterruptDeferral {
 public:
  explicit InterruptDeferral(std::string notice);
  ~InterruptDeferral();
  InterruptDeferral(const InterruptDeferral&) = delete;
  InterruptDeferral& operator=(const InterruptDeferral&) = delete;
};

/// The signal an InterruptDeferral holds back (SIGINT, SIGTERM), 0 while none. One atomic load:
/// cheap enough to ask after every optimizer step.
int deferred_interrupt();

/// Ends the process as the deferred signal would have (the interrupt hooks, the pending files
/// removed, the one line, exit 128 + signal). Only after deferred_interrupt() returned a signal.
[[noreturn]] void end_deferred_interrupt();

/// Makes SIGINT and SIGTERM end this process cleanly: a watcher thread removes the pending
/// files, prints "<command>: interrupted by signal 2 (SIGINT); removed N unfinished file(s)" on
/// stderr and exits with 128 + the signal. Idempotent. A launcher that catches the signals itself
/// while it runs (distributed::launch_workers) takes them over and gives them back.
void install_interrupt_cleanup(const std::string& command);

}  // namespace oml::io
