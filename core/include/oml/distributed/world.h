#pragma once
// Who this process is in a multi-process run: rank, world size, local rank and where the
// rendezvous store lives — read from the variables torchrun, srun and oml's own launcher set.
//
//   const World world = world_from_environment();   // throws UsageError on bad values
//   if (world.is_distributed()) ... ProcessGroup::connect(world, options) ...
//
// Variables (see docs/ddp.md):
//   RANK, WORLD_SIZE                 global rank and number of ranks (torchrun, oml launcher)
//   LOCAL_RANK, LOCAL_WORLD_SIZE     rank and number of ranks on this machine
//   MASTER_ADDR, MASTER_PORT         the rendezvous store (required when WORLD_SIZE > 1)
//   SLURM_PROCID, SLURM_NTASKS,      used under `srun` when RANK/WORLD_SIZE are not set
//   SLURM_LOCALID, SLURM_NTASKS_PER_NODE
//   TORCHELASTIC_USE_AGENT_STORE     "True": the launcher hosts the store, rank 0 only connects
// Nothing set: a single process (world size 1), which needs no process group.

#include <functional>
#include <optional>
#include <string>

namespace oml::distributed {

struct World {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  /// True when a launcher (oml's or torchrun's agent) hosts the TCPStore; otherwise rank 0
  /// hosts it.
  bool launcher_hosts_store = false;
  /// Where the values came from, for messages: "single process", "RANK/WORLD_SIZE", "SLURM".
  std::string source = "single process";

  bool is_distributed() const { return world_size > 1; }
  bool is_main() const { return rank == 0; }
};

/// Looks up one environment variable; nullopt when unset. Tests pass a map-backed lookup.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;

/// The real process environment (getenv). Empty values count as unset.
Environment process_environment();

/// Reads and validates the world. Throws UsageError naming the variable, its value and what
/// was expected (non-integer, rank outside [0, WORLD_SIZE), missing MASTER_ADDR, ...).
World world_from_environment(const Environment& env = process_environment());

/// "rank 1 of 3 (local 1 of 3, store 127.0.0.1:29500)".
std::string describe(const World& world);

}  // namespace oml::distributed
