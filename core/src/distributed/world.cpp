#include "oml/distributed/world.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "oml/common/error.h"

namespace oml::distributed {

namespace {

// Strict integer parsing: the whole value must be a base-10 integer within int range.
int parse_int(const std::string& name, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const long parsed = std::strtol(value.c_str(), &end, 10);
  OML_CHECK(!value.empty() && end == value.c_str() + value.size() && errno == 0 &&
                parsed >= std::numeric_limits<int>::min() && parsed <= std::numeric_limits<int>::max(),
            UsageError, "environment variable ", name, "='", value, "' is not an integer");
  return static_cast<int>(parsed);
}

std::optional<int> optional_int(const Environment& env, const std::string& name) {
  const auto value = env(name);
  if (!value) return std::nullopt;
  return parse_int(name, *value);
}

int required_int(const Environment& env, const std::string& name, const std::string& because) {
  const auto value = env(name);
  OML_CHECK(value.has_value(), UsageError, "environment variable ", name, " is not set (", because, ")");
  return parse_int(name, *value);
}

// SLURM_NTASKS_PER_NODE may read "4" or "4(x2)"; the leading count is what we need.
std::optional<int> slurm_tasks_per_node(const Environment& env) {
  const auto value = env("SLURM_NTASKS_PER_NODE");
  if (!value) return std::nullopt;
  const std::string count = value->substr(0, value->find('('));
  return parse_int("SLURM_NTASKS_PER_NODE", count);
}

// Without LOCAL_RANK: one machine's share in order (validate() rejects a local world <= 0).
int default_local_rank(const World& w) { return w.local_world_size > 0 ? w.rank % w.local_world_size : 0; }

bool is_true(const std::optional<std::string>& value) {
  return value && (*value == "True" || *value == "true" || *value == "1");
}

void validate(const World& w, const std::string& rank_var, const std::string& size_var,
              const std::string& local_var) {
  OML_CHECK(w.world_size >= 1, UsageError, "environment variable ", size_var, "=", w.world_size,
            " must be at least 1");
  OML_CHECK(w.rank >= 0 && w.rank < w.world_size, UsageError, "environment variable ", rank_var, "=", w.rank,
            " must be in [0, ", size_var, "=", w.world_size, ")");
  OML_CHECK(w.local_world_size >= 1 && w.local_world_size <= w.world_size, UsageError, "local world size ",
            w.local_world_size, " must be in [1, ", size_var, "=", w.world_size, "]");
  OML_CHECK(w.local_rank >= 0 && w.local_rank < w.local_world_size, UsageError, "environment variable ",
            local_var, "=", w.local_rank, " must be in [0, local world size ", w.local_world_size, ")");
}

void read_master(const Environment& env, World& w) {
  if (w.world_size <= 1) return;
  const auto addr = env("MASTER_ADDR");
  OML_CHECK(addr.has_value(), UsageError, "environment variable MASTER_ADDR is not set (needed to find the ",
            "rendezvous store of a ", w.world_size, "-rank run)");
  w.master_addr = *addr;
  w.master_port = required_int(env, "MASTER_PORT", "needed to find the rendezvous store");
  OML_CHECK(w.master_port >= 1 && w.master_port <= 65535, UsageError,
            "environment variable MASTER_PORT=", w.master_port, " must be a TCP port in [1, 65535]");
  w.launcher_hosts_store = is_true(env("TORCHELASTIC_USE_AGENT_STORE"));
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

World world_from_environment(const Environment& env) {
  World w;
  if (env("RANK") || env("WORLD_SIZE")) {
    // torchrun / oml launcher / hand-set variables.
    w.source = "RANK/WORLD_SIZE";
    w.rank = required_int(env, "RANK", "WORLD_SIZE is set, so RANK must be too");
    w.world_size = required_int(env, "WORLD_SIZE", "RANK is set, so WORLD_SIZE must be too");
    w.local_world_size = optional_int(env, "LOCAL_WORLD_SIZE").value_or(w.world_size);
    w.local_rank = optional_int(env, "LOCAL_RANK").value_or(default_local_rank(w));
    validate(w, "RANK", "WORLD_SIZE", "LOCAL_RANK");
    read_master(env, w);
  } else if (env("SLURM_PROCID") || env("SLURM_NTASKS")) {
    w.source = "SLURM";
    w.rank = required_int(env, "SLURM_PROCID", "SLURM_NTASKS is set, so SLURM_PROCID must be too");
    w.world_size = required_int(env, "SLURM_NTASKS", "SLURM_PROCID is set, so SLURM_NTASKS must be too");
    w.local_world_size = slurm_tasks_per_node(env).value_or(w.world_size);
    w.local_rank = optional_int(env, "SLURM_LOCALID").value_or(default_local_rank(w));
    validate(w, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID");
    read_master(env, w);
  }
  return w;
}

std::string describe(const World& w) {
  if (!w.is_distributed()) return "single process";
  return "rank " + std::to_string(w.rank) + " of " + std::to_string(w.world_size) + " (local " +
         std::to_string(w.local_rank) + " of " + std::to_string(w.local_world_size) + ", store " +
         w.master_addr + ":" + std::to_string(w.master_port) + ")";
}

}  // namespace oml::distributed
