#pragma once
// Errors about one argument of a component, pointed at the argument in the user's config.
//
// A component's checks often run where its YAML node is out of reach (a constructor that takes
// an options struct). There, throw with the argument's key:
//
//   OML_CHECK(...) is not enough:    "sampler 'balance': n_labels must be > 1, got 1"
//   config::fail_argument("sampler 'balance'", "n_labels", "must be > 1, got ", n);
//
// and the registry that built the component (Registry::create) puts the argument's place in
// front of the message:
//
//   train.yaml:7:22: sampler.args.n_labels: sampler 'balance': must be > 1, got 1
//
// When the argument was not given in the config (a default failed), the place is the `args:`
// mapping; without any node (a component built from code) the message stays as it is. The
// error is a ConfigError either way, so commands exit with code 2. Plugins use the same call.

#include <string>
#include <utility>

#include "oml/common/error.h"
#include "oml/config/node.h"

namespace oml::config {

/// ConfigError about the argument `key` of a component; `message` names the component.
class ArgumentError : public ConfigError {
 public:
  ArgumentError(std::string key, const std::string& message) : ConfigError(message), key_(std::move(key)) {}
  /// The argument's key in the component's `args:` mapping ("n_labels").
  const std::string& key() const { return key_; }

 private:
  std::string key_;
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

/// The ConfigError for `error` with the place of its argument in `args` in front
/// ("file:line:col: <args path>.<key>: <message>"): the argument's node when the config gives
/// it, else the args mapping (or just its key path when the config has no args); `error`
/// unchanged (as a ConfigError) when `args` names no place at all. Context lines are kept.
inline ConfigError place_argument_error(const Node& args, const ArgumentError& error) {
  const Node given = args.is_map() ? args[error.key()] : Node();
  const Node& place = given.defined() ? given : args;
  const bool has_place = place.defined() || !place.path().empty();
  ConfigError placed(has_place ? place.describe() + ": " + error.what() : std::string(error.what()));
  for (const auto& line : error.context()) placed.add_context(line);
  return placed;
}

}  // namespace oml::config
