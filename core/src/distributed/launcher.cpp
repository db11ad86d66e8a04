#include "oml/distributed/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "c10d_adapter.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/distributed/process_group.h"

extern char** environ;

namespace oml::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// ---- signals: a self-pipe turns SIGINT/SIGTERM into readable bytes for the poll loop ------
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signo) {
  const unsigned char byte = static_cast<unsigned char>(signo);
  const int saved = errno;
  [[maybe_unused]] const auto n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

class SignalForwarding {
 public:
  SignalForwarding() {
    OML_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, RuntimeError,
              "launcher: cannot create a pipe: ", std::strerror(errno));
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// ---- one worker ---------------------------------------------------------------------------
struct Stream {
  int fd = -1;     // read end of the worker's pipe
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

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Forwards complete lines with the rank prefix; `final` flushes an unterminated last line.
void forward_lines(Stream& s, int rank, bool final) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string out;
  std::size_t start = 0, nl;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    out += prefix + s.partial.substr(start, nl - start + 1);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (final && !s.partial.empty()) {
    out += prefix + s.partial + "\n";
    s.partial.clear();
  }
  if (!out.empty()) write_all(s.target, out);
}

// Reads what is available; closes the stream at EOF.
void drain(Stream& s, int rank) {
  char buffer[65536];
  while (s.fd >= 0) {
    const ssize_t n = ::read(s.fd, buffer, sizeof buffer);
    if (n > 0) {
      s.partial.append(buffer, static_cast<std::size_t>(n));
      forward_lines(s, rank, false);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    ::close(s.fd);
    s.fd = -1;
    forward_lines(s, rank, true);
  }
}

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return std::to_string(signo) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + signal_name(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

// Everything the child needs is prepared before fork(): after it only async-signal-safe
// calls are allowed (the launcher has threads: the store server).
struct ExecPlan {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  void finalize() {
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

ExecPlan make_plan(const std::vector<std::string>& argv, const std::map<std::string, std::string>& vars) {
  ExecPlan plan;
  plan.args = argv;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (!vars.count(name)) plan.env.push_back(entry);
  }
  for (const auto& [name, value] : vars) plan.env.push_back(name + "=" + value);
  return plan;  // finalize() once the plan sits where it stays: moving strings moves their bytes
}

void spawn(Worker& w, ExecPlan& plan, pid_t launcher_pid) {
  int out[2], err[2];
  OML_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, RuntimeError,
            "launcher: cannot create pipes: ", std::strerror(errno));
  const pid_t pid = ::fork();
  OML_CHECK(pid >= 0, RuntimeError, "launcher: cannot start rank ", w.rank, ": ", std::strerror(errno));
  if (pid == 0) {
    // Own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher_pid) ::_exit(127);  // the launcher died before prctl
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execve("/proc/self/exe", plan.argv.data(), plan.envp.data());
    const char message[] = "launcher: cannot execute /proc/self/exe\n";
    [[maybe_unused]] const auto n = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  w.pid = pid;
  w.running = true;
  w.out = {out[0], STDOUT_FILENO, {}};
  w.err = {err[0], STDERR_FILENO, {}};
}

void signal_all(std::vector<Worker>& workers, int signo) {
  for (auto& w : workers) {
    if (w.running) ::kill(-w.pid, signo);  // the worker's whole process group
  }
}

// The rank a failure record ("rank 2 stopped with an error") names, if any.
std::optional<int> named_in_record(detail::C10dStore& store) {
  try {
    const auto record = store.try_get(kFailureKey);
    if (!record || record->rfind("rank ", 0) != 0) return std::nullopt;
    return std::stoi(record->substr(5));
  } catch (...) {
    return std::nullopt;
  }
}

void validate(const LaunchOptions& o) {
  OML_CHECK(o.nproc_per_node >= 1, UsageError, "--nproc-per-node must be at least 1, got ", o.nproc_per_node);
  OML_CHECK(o.nnodes >= 1, UsageError, "--nnodes must be at least 1, got ", o.nnodes);
  OML_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, UsageError,
            "--node-rank must be in [0, --nnodes=", o.nnodes, "), got ", o.node_rank);
  OML_CHECK(o.master_port >= 0 && o.master_port <= 65535, UsageError,
            "--master-port must be a TCP port in [1, 65535], got ", o.master_port);
  OML_CHECK(o.grace_s >= 0, UsageError, "launcher grace period must be >= 0, got ", o.grace_s);
  if (o.nnodes > 1) {
    OML_CHECK(o.master_port > 0, UsageError, "--master-port is required with --nnodes ", o.nnodes,
              " (every machine must use the same port)");
    OML_CHECK(!o.master_addr.empty(), UsageError,
              "--master-addr (the address of the --node-rank 0 machine) is ", "required with --nnodes ",
              o.nnodes);
  }
}

}  // namespace

bool is_worker_process(const Environment& env) {
  if (env("RANK") || env("WORLD_SIZE")) return true;
  const auto tasks = env("SLURM_NTASKS");
  return tasks && *tasks != "1";
}

LaunchResult launch_workers(const std::vector<std::string>& argv, const LaunchOptions& options) {
  validate(options);
  const auto store_timeout = std::chrono::milliseconds(static_cast<int64_t>(options.store_timeout_s * 1000));
  std::shared_ptr<detail::C10dStore> store;
  const std::string addr = options.master_addr.empty() ? "127.0.0.1" : options.master_addr;
  try {
    store = options.node_rank == 0 ? detail::C10dStore::host(options.master_port, store_timeout)
                                   : detail::C10dStore::connect(addr, options.master_port, store_timeout);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw DistributedError("launcher: cannot " +
                           std::string(options.node_rank == 0
                                           ? "host the rendezvous store on port "
                                           : "reach the rendezvous store at " + addr + ":") +
                           std::to_string(options.master_port) + ": " + what.substr(0, what.find('\n')));
  }
  const int port = options.node_rank == 0 ? store->port() : options.master_port;
  const int world_size = options.nnodes * options.nproc_per_node;
  SignalForwarding signals;
  // Printed once signals are forwarded: from here on Ctrl-C reaches every rank.
  log::info("launching " + std::to_string(options.nproc_per_node) + " rank(s) on this machine (world size " +
            std::to_string(world_size) + ", store " + addr + ":" + std::to_string(port) + ")");
  std::vector<Worker> workers(options.nproc_per_node);
  const pid_t self = ::getpid();
  for (int local = 0; local < options.nproc_per_node; ++local) {
    Worker& w = workers[local];
    w.rank = options.node_rank * options.nproc_per_node + local;
    ExecPlan plan = make_plan(argv, {{"RANK", std::to_string(w.rank)},
                                     {"WORLD_SIZE", std::to_string(world_size)},
                                     {"LOCAL_RANK", std::to_string(local)},
                                     {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
                                     {"GROUP_RANK", std::to_string(options.node_rank)},
                                     {"MASTER_ADDR", addr},
                                     {"MASTER_PORT", std::to_string(port)},
                                     {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                     {kPrefixedByLauncher, "1"}});
    plan.finalize();
    try {
      spawn(w, plan, self);
    } catch (...) {
      signal_all(workers, SIGKILL);
      for (auto& other : workers) {
        if (other.running) ::waitpid(other.pid, nullptr, 0);
      }
      throw;
    }
  }

  LaunchResult result;
  int interrupted_by = 0;
  // Deadlines for SIGTERM and SIGKILL; `never` while none is due.
  constexpr Clock::time_point never = Clock::time_point::max();
  Clock::time_point term_at = never, kill_at = never;
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000));

  Worker* first_failed = nullptr;  // first worker reaped with a failure
  Worker* culprit = nullptr;       // the one to report: named by the store's record if local
  auto running = [&] {
    int n = 0;
    for (const auto& w : workers) n += w.running || w.out.fd >= 0 || w.err.fd >= 0;
    return n;
  };
  while (running() > 0) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    std::vector<Stream*> streams{nullptr};
    for (auto& w : workers) {
      for (Stream* s : {&w.out, &w.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    ::poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) {
        for (auto& w : workers) {
          if (streams[i] == &w.out || streams[i] == &w.err) drain(*streams[i], w.rank);
        }
      }
    }
    // Signals: forward; a second one means "now".
    unsigned char signo = 0;
    while (::read(signals.fd(), &signo, 1) == 1) {
      if (interrupted_by != 0) {
        signal_all(workers, SIGKILL);
      } else {
        interrupted_by = signo;
        signal_all(workers, signo);
        kill_at = Clock::now() + grace;
      }
    }
    // Reap.
    std::vector<Worker*> failed_now;
    for (auto& w : workers) {
      if (!w.running) continue;
      int status = 0;
      if (::waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      w.running = false;
      w.status = status;
      ::kill(-w.pid, SIGKILL);  // anything the worker left in its process group
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) failed_now.push_back(&w);
    }
    // Who failed first? A rank that throws records itself in the store before it exits, but
    // the ranks that notice it may exit sooner; so the record decides, and we wait for the
    // named rank to end before reporting it.
    if (result.failed_rank < 0 && interrupted_by == 0) {
      if (!failed_now.empty() && first_failed == nullptr) {
        first_failed = failed_now.front();
        culprit = first_failed;
        if (const auto named = named_in_record(*store)) {
          for (auto& w : workers) {
            if (w.rank == *named) culprit = &w;
          }
        }
        term_at = Clock::now() + grace;
      }
      if (culprit != nullptr && !culprit->running) {
        Worker* reported = exit_code_of(culprit->status) != 0 ? culprit : first_failed;
        result.failed_rank = reported->rank;
        result.exit_code = exit_code_of(reported->status);
        result.message = "rank " + std::to_string(reported->rank) + " " + describe_status(reported->status);
        try {
          store->set_if_absent(kFailureKey, result.message);
        } catch (...) {
          // the others then report a generic peer failure
        }
      }
    }
    const auto now = Clock::now();
    if (now >= term_at) {
      signal_all(workers, SIGTERM);
      term_at = never;
      kill_at = now + grace;
    }
    if (now >= kill_at) {
      signal_all(workers, SIGKILL);
      kill_at = never;
    }
  }
  if (interrupted_by != 0 && result.failed_rank < 0) {
    result.exit_code = 128 + interrupted_by;
    result.message = "interrupted by signal " + signal_name(interrupted_by) + "; stopped every rank";
  } else if (result.failed_rank >= 0) {
    int others = 0;
    for (const auto& w : workers) others += w.rank != result.failed_rank;
    result.message +=
        others > 0 ? "; the other " + std::to_string(others) + " rank(s) on this machine were stopped" : "";
  }
  return result;
}

}  // namespace oml::distributed
