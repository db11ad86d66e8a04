#pragma once
// Starting the ranks of a multi-process run on this machine: `oml-train --nproc-per-node N`.
//
//   LaunchOptions options;  options.nproc_per_node = 2;
//   const LaunchResult r = launch_workers(argv, options);   // blocks until every worker ended
//   if (r.exit_code != 0) std::cerr << r.message << "\n";
//
// The launcher re-executes this program (/proc/self/exe) with the same arguments once per
// local rank, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
// MASTER_PORT and TORCHELASTIC_USE_AGENT_STORE=True set (so workers never launch again). It
// hosts the rendezvous TCPStore itself on node 0 (any free port unless one is given), so the
// store outlives any worker and failures can be recorded in it.
//
// Guarantees:
//  - every output line of rank r appears on the launcher's stdout/stderr as "[rank r] line";
//  - SIGINT/SIGTERM are forwarded to every worker (SIGKILL after the grace period, or at
//    once on a second signal);
//  - when a worker fails (non-zero exit or signal), the failure "rank r ..." is recorded in the
//    store so the other ranks can name it, they get `grace_s` to stop on their own, then
//    SIGTERM, then SIGKILL after another `grace_s`; the result carries the first failing
//    rank's exit code (128 + signal for a signal) and a message naming it;
//  - workers die with the launcher (PR_SET_PDEATHSIG), so none outlives it;
//  - with several machines, a machine started for another world size than node 0 starts no
//    worker (ConfigError, and a failure record node 0's ranks name); while the workers run, the
//    launcher increments its machine's heartbeat in the store every 0.5 s, and no store call
//    blocks it for more than 3 s (the store may end up behind a dead link).

#include <map>
#include <string>
#include <vector>

#include "oml/config/options.h"
#include "oml/distributed/world.h"

namespace oml::distributed {

/// The most ranks one machine may start (`devices:` in the config says the same).
using config::kMaxRanksPerNode;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;         ///< node 0's address; default 127.0.0.1 for a single machine
  int master_port = 0;             ///< 0: any free port (only with nnodes = 1)
  double grace_s = 5.0;            ///< after a failure: time before SIGTERM, then before SIGKILL
  double store_timeout_s = 300.0;  ///< node > 0: how long to wait for node 0's store
  /// Environment variables every rank of every machine gets with node 0's values (passed on
  /// through the store), e.g. the run's start time that `${now:...}` formats.
  std::map<std::string, std::string> shared_env;
};

struct LaunchResult {
  int exit_code = 0;  ///< 0, or the first failing worker's code (128 + signal when killed)
  int failed_rank = -1;
  std::string message;  ///< "rank 1 was killed by signal 9 (SIGKILL)"; empty on success
};

/// True when this process already is a rank of a multi-process run (started by this
/// launcher, torchrun or srun with several tasks) and must not launch workers itself.
bool is_worker_process(const Environment& env = process_environment());

/// Checks the options (UsageError naming the flag) and runs the workers to the end.
LaunchResult launch_workers(const std::vector<std::string>& argv, const LaunchOptions& options);

/// Variable set by the launcher: workers' logs leave the "[rank r]" prefix to the launcher.
inline constexpr const char* kPrefixedByLauncher = "OML_LAUNCHER_PREFIXES_OUTPUT";

}  // namespace oml::distributed
