#include "shell/launch.h"

#include <boost/program_options.hpp>

#include <iostream>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/config/document.h"
#include "oml/distributed/launcher.h"
#include "oml/distributed/world.h"

namespace po = boost::program_options;

namespace oml::cli {

void add_launch_options(po::options_description& o) {
  // clang-format off
  o.add_options()
    ("nproc-per-node", po::value<int>()->default_value(1), "worker processes (ranks) to start on this machine")
    ("nnodes", po::value<int>()->default_value(1), "number of machines (each runs this command)")
    ("node-rank", po::value<int>()->default_value(0), "index of this machine in [0, --nnodes)")
    ("master-addr", po::value<std::string>(), "address of the --node-rank 0 machine (default 127.0.0.1)")
    ("master-port", po::value<int>(), "rendezvous port on the master (default: a free port; required with --nnodes > 1)");
  // clang-format on
}

std::optional<int> launch_if_requested(const Invocation& inv, const config::RunConfig& config) {
  namespace dist = oml::distributed;
  dist::LaunchOptions options;
  options.nproc_per_node = inv.vars["nproc-per-node"].as<int>();
  options.nnodes = inv.vars["nnodes"].as<int>();
  options.node_rank = inv.vars["node-rank"].as<int>();
  if (inv.vars.count("master-addr")) options.master_addr = inv.vars["master-addr"].as<std::string>();
  if (inv.vars.count("master-port")) options.master_port = inv.vars["master-port"].as<int>();

  const auto level = inv.vars.count("verbose") ? log::Level::debug
                     : inv.vars.count("quiet") ? log::Level::warn
                                               : log::Level::info;
  if (dist::is_worker_process()) {
    const dist::World world = dist::world_from_environment();
    // Ranks of an external launcher (torchrun, srun) prefix their own lines and get told when
    // this command's rank count settings are overruled.
    if (!dist::process_environment()(dist::kPrefixedByLauncher)) {
      log::init(world.rank, level);
      if (options.nproc_per_node > 1) {
        log::warn("--nproc-per-node is ignored: this process is " + dist::describe(world) +
                  " of a run started by an external launcher");
      } else if (config.devices > 1) {
        log::warn("`devices` in the config is ignored: this process is " + dist::describe(world) +
                  " of a run started by an external launcher, which decides the number of ranks");
      }
    }
    return std::nullopt;
  }
  // `devices: N` in the config is the number of ranks per node when --nproc-per-node is not given.
  if (inv.vars["nproc-per-node"].defaulted()) options.nproc_per_node = static_cast<int>(config.devices);
  if (options.nproc_per_node * options.nnodes == 1) return std::nullopt;
  // ${now:...} resolves to the launch time on every rank.
  options.shared_env[config::kRunStartTimeVariable] = std::to_string(config::run_start_time());
  const dist::LaunchResult result = dist::launch_workers(inv.argv, options);
  if (result.exit_code != 0) {
    std::cerr << inv.command << ": distributed error: " << result.message << "\n";
  }
  return result.exit_code;
}

std::optional<int> launch_if_requested(const Invocation& inv) {
  return launch_if_requested(inv, config::RunConfig{});
}

}  // namespace oml::cli
