#include "oml/distributed/launcher.h"

#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "c10d_adapter.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/distributed/detail/failure_record.h"
#include "oml/distributed/process_group.h"
#include "store_keys.h"
#include "worker_group.h"

namespace oml::distributed {

namespace {

using Clock = std::chrono::steady_clock;
using detail::FailureRecord;
using detail::WorkerExit;
using detail::WorkerGroup;

void validate(const LaunchOptions& o) {
  OML_CHECK(o.nproc_per_node >= 1, UsageError, "--nproc-per-node must be at least 1, got ", o.nproc_per_node);
  OML_CHECK(o.nproc_per_node <= kMaxRanksPerNode, UsageError, "--nproc-per-node must be at most ",
            kMaxRanksPerNode, " (ranks on one machine), got ", o.nproc_per_node);
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

// What the launcher does about what happens to its workers: forwards signals (SIGKILL on a
// second one), decides which failure to report, records it in the store, and stops the other
// workers (SIGTERM after the grace period, SIGKILL after another).
class Supervisor {
 public:
  Supervisor(WorkerGroup& workers, detail::C10dStore& store, std::chrono::milliseconds grace)
      : workers_(workers), store_(store), grace_(grace) {}

  void on_signal(int signo) {
    if (interrupted_by_ != 0) {
      workers_.signal_all(SIGKILL);
      return;
    }
    interrupted_by_ = signo;
    workers_.signal_all(signo);
    kill_at_ = Clock::now() + grace_;
  }

  // Called on every turn of the loop with the workers that ended since the last one.
  void on_exits(const std::vector<WorkerExit>& ended) {
    if (report_ || interrupted_by_ != 0) return;
    // Who failed first? A rank that throws records itself in the store before it exits, but
    // the ranks that notice it may exit sooner; so the record decides, and we wait for the
    // named rank to end before reporting it.
    if (!first_failed_) {
      for (const WorkerExit& exit : ended) {
        if (exit.succeeded()) continue;
        first_failed_ = exit;
        culprit_ = exit.rank;
        if (const auto named = named_in_record(); named && workers_.has(*named)) culprit_ = *named;
        term_at_ = Clock::now() + grace_;
        break;
      }
    }
    if (!first_failed_) return;
    const std::optional<WorkerExit> culprit = workers_.exit_of(culprit_);
    if (!culprit) return;
    const WorkerExit& reported = culprit->exit_code() != 0 ? *culprit : *first_failed_;
    report_ = reported;
    try {
      store_.set_if_absent(kFailureKey, FailureRecord{reported.rank, reported.describe()}.encode());
    } catch (...) {
      // the others then report a generic peer failure
    }
  }

  // Sends the SIGTERM and SIGKILL that are due.
  void on_tick() {
    const auto now = Clock::now();
    if (now >= term_at_) {
      note_stuck_ranks();
      workers_.signal_all(SIGTERM);
      term_at_ = kNever;
      kill_at_ = now + grace_;
    }
    if (now >= kill_at_) {
      workers_.signal_all(SIGKILL);
      kill_at_ = kNever;
    }
  }

  // One heartbeat (detail::kHeartbeatKeyPrefix): a bounded call, and none once the store is lost.
  void beat(int node_rank) {
    if (store_.lost()) return;
    try {
      store_.add(detail::kHeartbeatKeyPrefix + std::to_string(node_rank), 1);
    } catch (...) {
      // the store is lost now; the ranks find out by themselves and say so
    }
  }

  LaunchResult result() const {
    LaunchResult result;
    if (report_ && !stuck_.empty()) {
      result.failed_rank = stuck_.front();
      result.exit_code = report_->exit_code();
      std::string ranks;
      for (const int rank : stuck_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
      result.message = "rank" + std::string(stuck_.size() > 1 ? "s " : " ") + ranks +
                       (stuck_.size() > 1 ? " are" : " is") + " stuck: rank " +
                       std::to_string(report_->rank) + "'s " + stuck_in_ + " (ddp.timeout_s) while " +
                       (stuck_.size() > 1 ? "they" : "it") + " still ran; stopped every rank";
    } else if (report_) {
      result.failed_rank = report_->rank;
      result.exit_code = report_->exit_code();
      result.message = FailureRecord{report_->rank, report_->describe()}.describe();
      const int others = workers_.size() - 1;
      if (others > 0) {
        result.message += "; the other " + std::to_string(others) + " rank(s) on this machine were stopped";
      }
      if (store_.lost()) result.message += "; the rendezvous store no longer answers this machine";
    } else if (interrupted_by_ != 0) {
      result.exit_code = 128 + interrupted_by_;
      result.message =
          "interrupted by signal " + detail::signal_name(interrupted_by_) + "; stopped every rank";
    }
    return result;
  }

 private:
  static constexpr Clock::time_point kNever = Clock::time_point::max();

  // A reported failure that is a collective's timeout (the rank set its timeout key) was caused
  // by the ranks that still run without having timed out themselves: the stuck ones. Checked
  // when the others are about to be stopped, a grace period after the failure, by which time
  // every rank that timed out too has said so.
  void note_stuck_ranks() {
    if (!report_) return;
    const std::optional<FailureRecord> timed_out = timeout_record(report_->rank);
    if (!timed_out) return;
    for (const int rank : workers_.running_ranks()) {
      if (!timeout_record(rank)) stuck_.push_back(rank);
    }
    stuck_in_ = timed_out->what;
  }

  std::optional<FailureRecord> timeout_record(int rank) {
    try {
      if (const auto bytes = store_.try_get(kTimeoutKeyPrefix + std::to_string(rank))) {
        return FailureRecord::decode(*bytes);
      }
    } catch (...) {
      // an unreachable store names nobody
    }
    return std::nullopt;
  }

  // The rank the store's failure record names, if it holds one.
  std::optional<int> named_in_record() {
    try {
      if (const auto bytes = store_.try_get(kFailureKey)) {
        if (const auto record = FailureRecord::decode(*bytes)) return record->rank;
      }
    } catch (...) {
      // an unreachable store names nobody
    }
    return std::nullopt;
  }

  WorkerGroup& workers_;
  detail::C10dStore& store_;
  const std::chrono::milliseconds grace_;
  int interrupted_by_ = 0;
  std::optional<WorkerExit> first_failed_;  // the first worker reaped with a failure
  int culprit_ = -1;                        // the rank to report: named by the record if local
  std::optional<WorkerExit> report_;        // the failure reported, once decided
  std::vector<int> stuck_;                  // ranks still running when a reported timeout ended the run
  std::string stuck_in_;                    // what timed out waiting for them
  Clock::time_point term_at_ = kNever, kill_at_ = kNever;
};

// The value node 0 published under `key` (it does so before it starts any rank).
std::string published_by_node0(detail::C10dStore& store, const std::string& key, const std::string& name,
                               std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::optional<std::string> published;
  while (!(published = store.try_get(key))) {
    OML_CHECK(Clock::now() < deadline, DistributedError, "launcher: node 0 did not publish ", name,
              " in the rendezvous store within ", timeout.count() / 1000, " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return *published;
}

// options.shared_env as node 0 has it: node 0 publishes its values in the store, the other
// machines wait for them.
std::map<std::string, std::string> node0_values(detail::C10dStore& store, const LaunchOptions& options,
                                                std::chrono::milliseconds timeout) {
  std::map<std::string, std::string> values = options.shared_env;
  for (auto& [name, value] : values) {
    const std::string key = "oml/shared_env/" + name;
    if (options.node_rank == 0) {
      store.set(key, value);
    } else {
      value = published_by_node0(store, key, name, timeout);
    }
  }
  return values;
}

// Every machine must be started for the same world size (--nnodes x --nproc-per-node): node 0
// publishes its own, the others compare before they start any rank. A machine that differs
// leaves the reason in the store (node 0's ranks name it when their rendezvous times out) and
// stops with a ConfigError (exit 2).
void check_world_size(detail::C10dStore& store, const LaunchOptions& options,
                      std::chrono::milliseconds timeout) {
  const std::string key = "oml/world_size";
  const std::string mine = std::to_string(options.nnodes * options.nproc_per_node) + " (--nnodes " +
                           std::to_string(options.nnodes) + " x --nproc-per-node " +
                           std::to_string(options.nproc_per_node) + ")";
  if (options.node_rank == 0) {
    store.set(key, mine);
    return;
  }
  const std::string node0 = published_by_node0(store, key, "its world size", timeout);
  if (node0 == mine) return;
  const std::string why = "node " + std::to_string(options.node_rank) + " was started for a world size of " +
                          mine + " but node 0 for " + node0;
  try {
    store.set_if_absent(
        kFailureKey,
        FailureRecord{options.node_rank * options.nproc_per_node, "did not start: " + why}.encode());
  } catch (...) {
    // node 0's ranks then only say that this machine's ranks never arrived
  }
  throw ConfigError(
      "launcher: " + why +
      "; every machine must be started with the same --nnodes and --nproc-per-node (or `devices`)");
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
  const std::map<std::string, std::string> shared_env = node0_values(*store, options, store_timeout);
  check_world_size(*store, options, store_timeout);
  const int world_size = options.nnodes * options.nproc_per_node;
  detail::SignalCatcher signals;
  // Printed once signals are caught: from here on Ctrl-C reaches every rank.
  log::info("launching " + std::to_string(options.nproc_per_node) + " rank(s) on this machine (world size " +
            std::to_string(world_size) + ", store " + addr + ":" + std::to_string(port) + ")");
  std::vector<detail::WorkerSpec> specs;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const int rank = options.node_rank * options.nproc_per_node + local;
    specs.push_back({rank,
                     argv,
                     {{"RANK", std::to_string(rank)},
                      {"WORLD_SIZE", std::to_string(world_size)},
                      {"LOCAL_RANK", std::to_string(local)},
                      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
                      {"GROUP_RANK", std::to_string(options.node_rank)},
                      {"MASTER_ADDR", addr},
                      {"MASTER_PORT", std::to_string(port)},
                      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                      {kPrefixedByLauncher, "1"}}});
    specs.back().env.insert(shared_env.begin(), shared_env.end());
  }
  // While the ranks run, no store call may block this loop for long: the store may end up
  // behind a dead link (c10d_adapter.h). The first heartbeat goes out before any rank starts.
  store->set_call_bound(std::chrono::milliseconds(detail::kAfterFailureBoundMs));
  try {
    store->add(detail::kHeartbeatKeyPrefix + std::to_string(options.node_rank), 1);
  } catch (const std::exception&) {
    // the ranks will find the store gone and say so
  }
  WorkerGroup workers(specs);
  Supervisor supervisor(workers, *store,
                        std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000)));
  auto next_beat = Clock::now() + std::chrono::milliseconds(detail::kHeartbeatPeriodMs);
  while (workers.active()) {
    workers.forward_output(signals.fd(), std::chrono::milliseconds(100));
    while (const auto signo = signals.next()) supervisor.on_signal(*signo);
    supervisor.on_exits(workers.reap());
    supervisor.on_tick();
    if (Clock::now() >= next_beat) {
      supervisor.beat(options.node_rank);
      next_beat = Clock::now() + std::chrono::milliseconds(detail::kHeartbeatPeriodMs);
    }
  }
  return supervisor.result();
}

}  // namespace oml::distributed
