#pragma once
// Internal to the launcher (oml/distributed/launcher.h): the mechanics of running the local
// ranks as child processes. The launcher decides what to do (when to stop whom, what to report);
// these types only do it.
//
//   SignalCatcher signals;                 // SIGINT/SIGTERM become readable bytes
//   WorkerGroup workers(specs);            // started; killed and reaped on destruction
//   while (workers.active()) {
//     workers.forward_output(signals.fd(), 100ms);
//     while (auto signo = signals.next()) workers.signal_all(*signo);
//     for (const WorkerExit& exit : workers.reap()) ...;
//   }

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oml::distributed::detail {

/// "9 (SIGKILL)"
std::string signal_name(int signo);

/// Turns SIGINT and SIGTERM into bytes on a pipe (the self-pipe trick) while it lives, so a poll
/// loop sees them; restores the previous handlers when destroyed. One at a time per process.
class SignalCatcher {
 public:
  SignalCatcher();
  ~SignalCatcher();
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  /// Readable when a signal arrived.
  int fd() const;
  /// The next signal that arrived, or nullopt when none is pending. Never blocks.
  std::optional<int> next();
};

/// One process to start: this program (/proc/self/exe) with `argv` and this process's
/// environment with `env` set on top.
struct WorkerSpec {
  int rank = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
};

/// How a worker ended.
struct WorkerExit {
  int rank = 0;
  int status = 0;  ///< as waitpid() reports it

  bool succeeded() const;
  /// The exit code, or 128 + the signal that killed it (as shells report it).
  int exit_code() const;
  /// "exited with code 2", "was killed by signal 9 (SIGKILL)"
  std::string describe() const;
};

/// The local workers of one run. Each runs in its own process group (a terminal's Ctrl-C
/// reaches the launcher only, which forwards it once), dies with the launcher
/// (PR_SET_PDEATHSIG), and has its stdout and stderr forwarded line by line as "[rank r] line".
class WorkerGroup {
 public:
  /// Starts every worker. When one cannot be started, those already running are killed and
  /// reaped, and RuntimeError names the rank.
  explicit WorkerGroup(const std::vector<WorkerSpec>& specs);
  /// Kills and reaps the workers still running: none outlives the group, even on an exception.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  /// Whether a worker still runs or still has output to forward.
  bool active() const;
  /// Waits up to `timeout` for output from any worker or for `wake_fd` to become readable,
  /// then forwards the complete lines read (a stream's last line at its end).
  void forward_output(int wake_fd, std::chrono::milliseconds timeout);
  /// Sends `signo` to the process group of every worker still running.
  void signal_all(int signo);
  /// The workers that ended since the last call, in rank order. Whatever a worker left in its
  /// process group is killed.
  std::vector<WorkerExit> reap();
  /// Whether `rank` is one of these workers.
  bool has(int rank) const;
  /// The ranks of the workers still running, in rank order.
  std::vector<int> running_ranks() const;
  /// How worker `rank` ended; nullopt while it runs.
  std::optional<WorkerExit> exit_of(int rank) const;

 private:
  struct Stream {
    int fd = -1;     // read end of the worker's pipe; -1 once closed
    int target = 1;  // our fd the lines go to
    std::string partial;
  };
  struct Worker {
    int rank = 0;
    pid_t pid = -1;
    bool running = false;
    int status = 0;
    Stream out, err;
  };
  void start(Worker& worker, const WorkerSpec& spec);
  void kill_and_reap_running() noexcept;

  std::vector<Worker> workers_;
};

}  // namespace oml::distributed::detail
