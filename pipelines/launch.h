#pragma once
// Multi-process start for the commands that can run distributed (oml-train, oml-validate,
// oml-predict). Each of them adds the launcher flags and calls launch_if_requested() first:
//
//   spec.add_options = [](po::options_description& o) { cli::add_launch_options(o); ... };
//   spec.run = [](const cli::Invocation& inv) {
//     if (auto code = cli::launch_if_requested(inv)) return *code;   // this process launched
//     ...                                                            // this process is a rank
//   };

#include <boost/program_options/options_description.hpp>

#include <optional>

#include "cli.h"

namespace oml::cli {

/// --nproc-per-node, --nnodes, --node-rank, --master-addr, --master-port.
void add_launch_options(boost::program_options::options_description& options);

/// When the flags ask for more than one process and this process is not already a rank,
/// checks the config once, starts the workers (oml::distributed::launch_workers), reports the
/// first failure naming its rank, and returns the exit code. Otherwise returns nullopt: the
/// caller runs the command itself, as a single process or as one rank (whose log lines then
/// carry "[rank r]" unless the oml launcher already prefixes them).
std::optional<int> launch_if_requested(const Invocation& invocation);

}  // namespace oml::cli
