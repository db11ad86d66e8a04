#pragma once
// The shell shared by every oml-* command: option parsing (Boost.Program_options), the common
// flags (--help, --version, --config, --set, --plugin, --list-components), plugin loading, and
// the one place where errors are caught and turned into a message and an exit code.

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/positional_options.hpp>
#include <boost/program_options/variables_map.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "oml/common/runtime.h"
#include "oml/config/run_config.h"

namespace oml {
struct ParsedComponents;
}  // namespace oml
namespace oml::config {
class ErrorList;
}  // namespace oml::config

namespace oml::cli {

/// What every command receives after parsing.
struct Invocation {
  std::string command;            ///< "oml-train"
  std::vector<std::string> argv;  ///< the original arguments (for relaunching workers)
  boost::program_options::variables_map vars;
  std::optional<std::string> config_path;
  std::vector<std::string> overrides;  ///< --set key=value, in order
  std::vector<std::string> plugins;    ///< --plugin PATH, in order

  /// Loads the config (with overrides), loads the plugins it and the command line name, and
  /// parses the typed RunConfig with every component's args (check_components) and the metric
  /// table, once, into RunConfig::components. Throws UsageError when --config was not given.
  config::RunConfig load_config() const;
  /// Same from a document already loaded (so a pipeline reads and resolves the file once).
  config::RunConfig load_config(const config::Document& document) const;
  /// The resolved config document (for writing into run directories).
  config::Document load_document() const;
};

struct CommandSpec {
  std::string name;          ///< "oml-train"
  std::string summary;       ///< one line for --help
  std::string usage;         ///< usage line(s) for --help
  bool needs_config = true;  ///< --config is required (unless --list-components)
  /// How freed memory is kept (oml/common/runtime.h); oml-train's is `training`.
  AllocatorUse allocator = AllocatorUse::general;
  /// Adds command-specific options.
  std::function<void(boost::program_options::options_description&)> add_options;
  /// Positional arguments (e.g. oml-convert's FORMAT).
  std::function<void(boost::program_options::positional_options_description&)> add_positional;
  /// The command itself; returns the exit code.
  std::function<int(const Invocation&)> run;
};

/// Parses, dispatches, and catches every error once. Exit codes: 0 success; 2 bad usage,
/// config, data or plugin; 1 failure while running.
int run_command(int argc, char** argv, const CommandSpec& spec);

/// Prints the exception being handled as `<name>: <kind>: <message>` (then any context lines;
/// LibTorch's errors without their backtrace) and returns its exit code
/// (docs/contracts.md#exit-codes): what run_command does with an error, for a program with a
/// main() of its own (the benchmarks). Call it inside a catch block.
int report_exception(const std::string& name);

/// Checks that every component the config names is registered and that its args, built-in or
/// plugin, parse without a problem (Registry::parse), without building any, and returns what
/// the parses made (the metric table is left to the caller): a ConfigError listing every
/// problem otherwise.
ParsedComponents check_components(const config::RunConfig& config);
/// The same, collecting the problems in `errors` (a slot whose parse failed is not ok()).
ParsedComponents check_components(const config::RunConfig& config, config::ErrorList& errors);

/// Prints every registry with names, help and origin (--list-components).
void print_components(std::ostream& out);

}  // namespace oml::cli
