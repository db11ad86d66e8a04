#pragma once
// Multi-process start for the commands that can run distributed (oml-train, oml-validate,
// oml-predict). Each of them adds the launcher flags and, once its config is loaded, calls
// launch_if_requested():
//
//   spec.add_options = [](po::options_description& o) { cli::add_launch_options(o); ... };
//   spec.run = [](const cli::Invocation& inv) {
//     const config::RunConfig config = inv.load_config();   // once, so a mistake is reported once
//     if (auto code = cli::launch_if_requested(inv, config)) return *code;   // this process launched
//     ...                                                                    // this process is a rank
//   };

#include <boost/program_options/options_description.hpp>

#include <optional>

#include "shell/cli.h"

namespace oml::cli {

/// --nproc-per-node, --nnodes, --node-rank, --master-addr, --master-port.
void add_launch_options(boost::program_options::options_description& options);

/// When the flags (or, without --nproc-per-node, the config's `devices`) ask for more than one
/// process and this process is not already a rank, starts the workers
/// (oml::distributed::launch_workers), reports the first failure naming its rank, and returns
/// the exit code. Otherwise returns nullopt: the
/// caller runs the command itself, as a single process or as one rank (whose log lines then
/// carry "[rank r]" unless the oml launcher already prefixes them).
std::optional<int> launch_if_requested(const Invocation& invocation, const config::RunConfig& config);

/// The same for programs without a config (benchmarks, the DDP test worker): only the flags count.
std::optional<int> launch_if_requested(const Invocation& invocation);

}  // namespace oml::cli
