#include "oml/io/pending_files.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>  // sigabbrev_np
#include <map>
#include <mutex>
#include <thread>

#include "../common/raw_io.h"
#include "oml/common/error.h"

namespace oml::io {

namespace fs = std::filesystem;

namespace {

// Guards g_pending. publish() holds it across a rename, and the interrupt cleanup takes it and
// never gives it back (the process ends), so no rename is ever cut in half.
std::mutex g_mutex;
std::map<const PendingFile*, fs::path> g_pending;

// Guards g_hooks (separately: a hook may take a while, and publish() must not wait for it).
std::mutex g_hooks_mutex;
std::map<uint64_t, std::function<void(int)>> g_hooks;
uint64_t g_next_hook = 0;

int g_interrupt_pipe[2] = {-1, -1};
std::string g_command;

// The handler only writes the signal's number into a pipe (async-signal-safe); the watcher thread
// does the rest with ordinary code.
void on_interrupt(int signo) {
  const unsigned char byte = static_cast<unsigned char>(signo);
  const int saved = errno;
  [[maybe_unused]] const auto n = ::write(g_interrupt_pipe[1], &byte, 1);
  errno = saved;
}

bool still_there(const fs::path& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

// With g_mutex held. Returns how many pending paths existed.
int remove_pending_locked() {
  int existed = 0;
  for (const auto& [owner, path] : g_pending) existed += still_there(path) ? 1 : 0;
  // Other threads may still be writing into a folder being removed (a conversion's workers
  // creating files and folders in its staging folder): remove until everything stays gone.
  for (int quiet_rounds = 0, round = 0; quiet_rounds < 3 && round < 200; ++round) {
    bool left = false;
    for (const auto& [owner, path] : g_pending) {
      std::error_code ec;
      fs::remove_all(path, ec);
      left = left || still_there(path);
    }
    quiet_rounds = left ? 0 : quiet_rounds + 1;
    if (quiet_rounds < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return existed;
}

void run_interrupt_hooks(int signo) {
  const std::lock_guard<std::mutex> lock(g_hooks_mutex);
  for (const auto& [id, hook] : g_hooks) {
    try {
      hook(signo);
    } catch (...) {  // the process is ending: a hook's failure must not stop the cleanup
    }
  }
}

std::atomic<int> g_interrupt_signal{0};

// The InterruptDeferral alive (at most one), its notice, and the signal it holds back.
std::mutex g_deferral_mutex;
bool g_deferring = false;
std::string g_deferral_notice;
std::atomic<int> g_deferred_signal{0};

// "interrupted by signal 2 (SIGINT)"
std::string interrupted_by(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return g_command + ": interrupted by signal " + std::to_string(signo) +
         (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

[[noreturn]] void clean_up_and_exit(int signo) {
  g_interrupt_signal = signo;
  g_mutex.lock();  // kept: no rename starts after this, and the one running has finished
  run_interrupt_hooks(signo);
  const int removed = remove_pending_locked();
  ::oml::detail::write_fully(STDERR_FILENO, interrupted_by(signo) + "; removed " + std::to_string(removed) +
                                                " unfinished file" + (removed == 1 ? "" : "s") + "\n");
  ::_exit(128 + signo);
}

// A first signal under a deferral is noted for its owner; returns false when the process must end now.
bool defer(int signo) {
  const std::lock_guard<std::mutex> lock(g_deferral_mutex);
  if (!g_deferring || g_deferred_signal != 0) return false;
  g_deferred_signal = signo;
  ::oml::detail::write_fully(STDERR_FILENO, interrupted_by(signo) + "; " + g_deferral_notice + "\n");
  return true;
}

void watch_for_interrupts() {
  unsigned char signo = 0;
  while (true) {
    const ssize_t n = ::read(g_interrupt_pipe[0], &signo, 1);
    if (n == 1 && !defer(signo)) clean_up_and_exit(signo);
    if (n == 1 || (n < 0 && errno == EINTR)) continue;
    return;  // the pipe is gone: nothing more will arrive
  }
}

}  // namespace

PendingFile::PendingFile(fs::path path) : path_(std::move(path)) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_pending.emplace(this, path_);
}

PendingFile::~PendingFile() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_pending.erase(this);
}

int interrupt_signal() { return g_interrupt_signal; }

InterruptDeferral::InterruptDeferral(std::string notice) {
  const std::lock_guard<std::mutex> lock(g_deferral_mutex);
  g_deferring = true;
  g_deferral_notice = std::move(notice);
}

InterruptDeferral::~InterruptDeferral() {
  int noted = 0;
  {
    const std::lock_guard<std::mutex> lock(g_deferral_mutex);
    g_deferring = false;
    noted = g_deferred_signal;
  }
  // The owner did not act on the signal (it left by an error, or finished meanwhile): the
  // interrupt ends the process now, as it would have without the deferral.
  if (noted != 0) clean_up_and_exit(noted);
}

int deferred_interrupt() { return g_deferred_signal.load(std::memory_order_relaxed); }

void end_deferred_interrupt() {
  const int signo = g_deferred_signal;
  OML_ASSERT(signo != 0, "end_deferred_interrupt() without a deferred signal");
  clean_up_and_exit(signo);
}

InterruptHook::InterruptHook(std::function<void(int signo)> hook) {
  const std::lock_guard<std::mutex> lock(g_hooks_mutex);
  id_ = g_next_hook++;
  g_hooks.emplace(id_, std::move(hook));
}

InterruptHook::~InterruptHook() {
  const std::lock_guard<std::mutex> lock(g_hooks_mutex);
  g_hooks.erase(id_);
}

void publish(const std::function<void()>& step) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  step();
}

void wait_if_interrupted() {
  const std::lock_guard<std::mutex> lock(g_mutex);  // blocks for good once the cleanup has begun
}

int remove_pending_files() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  return remove_pending_locked();
}

void install_interrupt_cleanup(const std::string& command) {
  static std::once_flag once;
  std::call_once(once, [&] {
    g_command = command;
    if (::pipe2(g_interrupt_pipe, O_CLOEXEC) != 0) return;  // no pipe: signals keep their default
    std::thread(watch_for_interrupts).detach();
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    action.sa_flags = SA_RESTART;  // the interrupted thread goes on until the watcher ends the process
    sigemptyset(&action.sa_mask);
    for (const int signo : {SIGINT, SIGTERM}) {
      // A signal ignored from the start (`nohup`, a shell's background job) stays ignored.
      struct sigaction previous {};
      if (::sigaction(signo, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
      ::sigaction(signo, &action, nullptr);
    }
  });
}

}  // namespace oml::io
