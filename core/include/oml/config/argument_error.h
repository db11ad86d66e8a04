#pragma once
// Errors about one argument of a component, pointed at the argument in the user's config.
//
// A component is made in two phases (oml/registry/registry.h): `parse` reads its `args:` into
// typed options and checks them; `build` makes the component from the options and the run's
// context. Each phase has its own error about one argument, thrown with the argument's key
// where the YAML node is out of reach (an options struct's check, a constructor):
//
//   parse:  config::check_argument(n > 1, "sampler 'balance'", "n_instances", "must be > 1, got ", n);
//           -> ArgumentError, a ConfigError: the args alone are wrong. Registry::parse collects it
//              with every other problem of the config (all of them are reported at once).
//   build:  config::check_fits(p <= labels, "sampler 'balance'", "n_labels", "...");
//           -> ArgumentMismatch, a DataError: the args are fine but do not fit the data or the run
//              they meet (more labels per batch than the dataset has, warm-up longer than the run).
//
// The registry puts the argument's place in front of either message:
//
//   train.yaml:7:22: sampler.args.n_labels: sampler 'balance': must be > 1, got 1
//
// When the argument was not given in the config (a default failed), the place is the `args:`
// mapping; without any node (a component built from code) the message stays as it is. Both
// errors exit with code 2. Plugins use the same calls.

#include <string>
#include <utility>

#include "oml/common/error.h"
#include "oml/config/node.h"

namespace oml::config {

/// The key of the argument an error is about ("n_labels"), carried by both error types.
class ArgumentKey {
 public:
  explicit ArgumentKey(std::string key) : key_(std::move(key)) {}
  /// The argument's key in the component's `args:` mapping.
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

/// Parse phase: argument `key` is wrong whatever the run (a ConfigError).
class ArgumentError : public ConfigError, public ArgumentKey {
 public:
  ArgumentError(std::string key, const std::string& message)
      : ConfigError(message), ArgumentKey(std::move(key)) {}
};

/// Build phase: argument `key` does not fit the data or the run (a DataError).
class ArgumentMismatch : public DataError, public ArgumentKey {
 public:
  ArgumentMismatch(std::string key, const std::string& message)
      : DataError(message), ArgumentKey(std::move(key)) {}
};

/// Throws ArgumentError "<component>: <message...>" about argument `key`:
///   fail_argument("metric 'ndcg'", "ndcg_top_k", "values must be positive integers, got ", k);
template <class... Args>
[[noreturn]] void fail_argument(const std::string& component, const std::string& key,
                                const Args&... message) {
  throw ArgumentError(key, ::oml::detail::concat(component, ": ", message...));
}

/// fail_argument(component, key, message...) unless `condition` holds:
///   check_argument(gamma > 0, "scheduler 'step'", "gamma", "gamma must be > 0, got ", gamma);
template <class... Args>
void check_argument(bool condition, const std::string& component, const std::string& key,
                    const Args&... message) {
  if (!condition) fail_argument(component, key, message...);
}

/// Throws ArgumentMismatch "<component>: <message...>" about argument `key` (build phase).
template <class... Args>
[[noreturn]] void fail_fit(const std::string& component, const std::string& key, const Args&... message) {
  throw ArgumentMismatch(key, ::oml::detail::concat(component, ": ", message...));
}

/// fail_fit(component, key, message...) unless `condition` holds.
template <class... Args>
void check_fits(bool condition, const std::string& component, const std::string& key,
                const Args&... message) {
  if (!condition) fail_fit(component, key, message...);
}

/// `error` (an ArgumentError or ArgumentMismatch) with the place of its argument in `args` in
/// front ("file:line:col: <args path>.<key>: <message>"): the argument's node when the config
/// gives it, else the args mapping (or just its key path when the config has no args); the
/// message unchanged when `args` names no place at all. Same type family, context lines kept.
template <class Placed, class Thrown>
Placed place_argument_error(const Node& args, const Thrown& error) {
  const Node given = args.is_map() ? args[error.key()] : Node();
  const Node& place = given.defined() ? given : args;
  const bool has_place = place.defined() || !place.path().empty();
  Placed placed(has_place ? place.describe() + ": " + error.what() : std::string(error.what()));
  for (const auto& line : error.context()) placed.add_context(line);
  return placed;
}

}  // namespace oml::config
