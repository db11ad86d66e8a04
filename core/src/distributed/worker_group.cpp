#include "worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../common/raw_io.h"
#include "oml/common/error.h"

extern char** environ;

namespace oml::distributed::detail {

namespace {

// ---- signals: the self-pipe SignalCatcher reads ------------------------------------------
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signo) {
  const unsigned char byte = static_cast<unsigned char>(signo);
  const int saved = errno;
  [[maybe_unused]] const auto n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

struct sigaction g_old_int {};
struct sigaction g_old_term {};

// Everything the child needs is prepared before fork(): after it only async-signal-safe calls
// are allowed (the launcher has threads: the store server).
struct ExecPlan {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;

  explicit ExecPlan(const WorkerSpec& spec) : args(spec.argv) {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (!spec.env.count(entry.substr(0, entry.find('=')))) env.push_back(entry);
    }
    for (const auto& [name, value] : spec.env) env.push_back(name + "=" + value);
    // The pointers last: the strings no longer move.
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  ExecPlan(const ExecPlan&) = delete;
  ExecPlan& operator=(const ExecPlan&) = delete;
};

// A pipe whose ends close themselves unless released.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    OML_CHECK(::pipe2(fd, O_CLOEXEC) == 0, RuntimeError,
              "launcher: cannot create a pipe: ", std::strerror(errno));
  }
  ~Pipe() {
    for (const int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  int release(int end) {
    const int f = fd[end];
    fd[end] = -1;
    return f;
  }
};

// SIGINT and SIGTERM blocked in this thread while it lives: a child forked meanwhile cannot run
// the launcher's handler (which would write into the launcher's signal pipe) before it resets
// the handlers; the parent gets any pending signal when the mask is restored.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &block, &previous_);
  }
  ~BlockedSignals() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t previous_;
};

}  // namespace

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return std::to_string(signo) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
}

// ---- SignalCatcher ------------------------------------------------------------------------
SignalCatcher::SignalCatcher() {
  OML_CHECK(g_signal_pipe[0] < 0, InternalError, "launcher: a SignalCatcher is already installed");
  OML_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, RuntimeError,
            "launcher: cannot create a pipe: ", std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
}

SignalCatcher::~SignalCatcher() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

int SignalCatcher::fd() const { return g_signal_pipe[0]; }

std::optional<int> SignalCatcher::next() {
  unsigned char signo = 0;
  if (::read(g_signal_pipe[0], &signo, 1) == 1) return signo;
  return std::nullopt;
}

// ---- WorkerExit ---------------------------------------------------------------------------
bool WorkerExit::succeeded() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

int WorkerExit::exit_code() const {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

std::string WorkerExit::describe() const {
  if (WIFSIGNALED(status)) return "was killed by signal " + signal_name(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

// ---- WorkerGroup --------------------------------------------------------------------------
WorkerGroup::WorkerGroup(const std::vector<WorkerSpec>& specs) : workers_(specs.size()) {
  try {
    for (std::size_t i = 0; i < specs.size(); ++i) start(workers_[i], specs[i]);
  } catch (...) {
    kill_and_reap_running();
    throw;
  }
}

WorkerGroup::~WorkerGroup() { kill_and_reap_running(); }

void WorkerGroup::start(Worker& w, const WorkerSpec& spec) {
  w.rank = spec.rank;
  const ExecPlan plan(spec);
  Pipe out, err;
  const pid_t launcher = ::getpid();
  pid_t pid;
  {
    const BlockedSignals blocked;
    pid = ::fork();
    if (pid == 0) {
      // Own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl
      struct sigaction default_action {};
      default_action.sa_handler = SIG_DFL;
      sigemptyset(&default_action.sa_mask);
      ::sigaction(SIGINT, &default_action, nullptr);
      ::sigaction(SIGTERM, &default_action, nullptr);
      ::pthread_sigmask(SIG_SETMASK, &blocked.previous(), nullptr);
      ::dup2(out.fd[1], STDOUT_FILENO);
      ::dup2(err.fd[1], STDERR_FILENO);
      ::execve("/proc/self/exe", plan.argv.data(), plan.envp.data());
      const char message[] = "launcher: cannot execute /proc/self/exe\n";
      [[maybe_unused]] const auto n = ::write(STDERR_FILENO, message, sizeof message - 1);
      ::_exit(127);
    }
  }
  OML_CHECK(pid >= 0, RuntimeError, "launcher: cannot start rank ", w.rank, ": ", std::strerror(errno));
  // The child does the same; whichever runs first, the group exists before signal_all needs it.
  ::setpgid(pid, pid);
  w.pid = pid;
  w.running = true;
  w.out = {out.release(0), STDOUT_FILENO, {}};
  w.err = {err.release(0), STDERR_FILENO, {}};
  ::fcntl(w.out.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(w.err.fd, F_SETFL, O_NONBLOCK);
}

void WorkerGroup::kill_and_reap_running() noexcept {
  for (auto& w : workers_) {
    if (!w.running) continue;
    ::kill(-w.pid, SIGKILL);
    ::waitpid(w.pid, &w.status, 0);
    w.running = false;
  }
  for (auto& w : workers_) {
    for (Stream* s : {&w.out, &w.err}) {
      if (s->fd >= 0) ::close(s->fd);
      s->fd = -1;
    }
  }
}

bool WorkerGroup::active() const {
  for (const auto& w : workers_) {
    if (w.running || w.out.fd >= 0 || w.err.fd >= 0) return true;
  }
  return false;
}

namespace {

// Forwards complete lines with the rank prefix; `final` flushes an unterminated last line.
template <class Stream>
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
  if (!out.empty()) ::oml::detail::write_fully(s.target, out);
}

// Reads what is available; closes the stream at EOF.
template <class Stream>
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

}  // namespace

void WorkerGroup::forward_output(int wake_fd, std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds{{wake_fd, POLLIN, 0}};
  std::vector<std::pair<Stream*, int>> streams{{nullptr, -1}};  // stream, rank
  for (auto& w : workers_) {
    for (Stream* s : {&w.out, &w.err}) {
      if (s->fd >= 0) {
        fds.push_back({s->fd, POLLIN, 0});
        streams.emplace_back(s, w.rank);
      }
    }
  }
  ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) drain(*streams[i].first, streams[i].second);
  }
}

void WorkerGroup::signal_all(int signo) {
  for (const auto& w : workers_) {
    if (w.running) ::kill(-w.pid, signo);  // the worker's whole process group
  }
}

std::vector<WorkerExit> WorkerGroup::reap() {
  std::vector<WorkerExit> ended;
  for (auto& w : workers_) {
    if (!w.running) continue;
    int status = 0;
    if (::waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
    w.running = false;
    w.status = status;
    ::kill(-w.pid, SIGKILL);  // anything the worker left in its process group
    ended.push_back({w.rank, status});
  }
  return ended;
}

bool WorkerGroup::has(int rank) const {
  for (const auto& w : workers_) {
    if (w.rank == rank) return true;
  }
  return false;
}

std::vector<int> WorkerGroup::running_ranks() const {
  std::vector<int> ranks;
  for (const auto& w : workers_) {
    if (w.running) ranks.push_back(w.rank);
  }
  return ranks;
}

std::optional<WorkerExit> WorkerGroup::exit_of(int rank) const {
  for (const auto& w : workers_) {
    if (w.rank == rank && !w.running && w.pid >= 0) return WorkerExit{w.rank, w.status};
  }
  return std::nullopt;
}

}  // namespace oml::distributed::detail
