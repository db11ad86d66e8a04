#pragma once
// Reading a YAML mapping into a typed options struct.
//
//   BalanceOptions opts;                 // defaults live in the struct
//   config::MapReader r(args);           // args: the component's `args:` node
//   r.required("n_labels", opts.n_labels);
//   r.optional("epoch_size", opts.epoch_size);
//   r.finish();                          // unknown keys -> ConfigError with file:line:column
//
// Every key must be read (or explicitly skipped) before finish(); a key the struct does not
// know is an error that lists the accepted keys and the closest one.

#include <functional>
#include <string>
#include <vector>

#include "oml/config/node.h"

namespace oml::config {

class ErrorList;

class MapReader {
 public:
  /// `map` may be undefined or null (treated as an empty mapping); anything else but a
  /// mapping is a ConfigError. `what` names the map in messages ("sampler 'balance' args").
  /// With `errors`, a bad value of one key (and every unknown key at finish()) is collected
  /// there and reading goes on with the next key, the field keeping its default.
  explicit MapReader(Node map, std::string what = "", ErrorList* errors = nullptr);
  virtual ~MapReader() = default;
  MapReader(const MapReader&) = default;
  MapReader& operator=(const MapReader&) = default;

  /// Reads `key` into `field` when present; leaves the default when absent or null
  /// (`key: null` / `key: ~` in YAML means "use the default").
  template <class T>
  MapReader& optional(const std::string& key, T& field) {
    guard([&] {
      Node child = take(key);
      if (!child.is_null()) field = child.template as<T>();
    });
    return *this;
  }

  /// The same for a key that OML also spells `alias` (`pfc_variance` for `pcf_variance`):
  /// either may be given; both is a ConfigError.
  template <class T>
  MapReader& optional(const std::string& key, const std::string& alias, T& field) {
    guard([&] {
      Node child = take_either(key, alias);
      if (!child.is_null()) field = child.template as<T>();
    });
    return *this;
  }

  /// Reads `key` into `field`; a missing key is a ConfigError.
  template <class T>
  MapReader& required(const std::string& key, T& field) {
    guard([&] { field = require(key).template as<T>(); });
    return *this;
  }

  /// Runs a read of its own (take() and as<T>() of keys the typed reads do not cover): its
  /// ConfigError is thrown, or collected like a key's when the reader has an ErrorList.
  MapReader& custom(const std::function<void()>& read) {
    guard(read);
    return *this;
  }

  /// The raw child node (undefined when absent); marks the key as known.
  Node take(const std::string& key);
  /// take() of whichever of `key` and `alias` is given (undefined when neither); both is a
  /// ConfigError at the second.
  Node take_either(const std::string& key, const std::string& alias);
  /// The raw child node; a missing key is a ConfigError.
  Node require(const std::string& key);
  bool has(const std::string& key) const;

  /// Marks keys that are accepted but handled elsewhere.
  MapReader& known(const std::vector<std::string>& keys);

  /// Throws ConfigError for the first key that was never taken, listing the accepted keys
  /// (with an ErrorList: collects one for each such key). Checks once: later calls do nothing.
  void finish() const;

  const Node& node() const { return map_; }

 protected:
  /// Adds a problem to the list (only called with one): ArgsReader adds its origin note.
  virtual void collect(ConfigError error) const;

 private:
  // Runs `read`: its ConfigError is thrown, or collected when there is a list.
  void guard(const std::function<void()>& read);

  Node map_;
  std::string what_;
  std::vector<std::string> accepted_;
  ErrorList* errors_ = nullptr;
  mutable bool finished_ = false;
};

/// A component reference: `{name: balance, args: {n_labels: 8}}`.
struct ComponentSpec {
  std::string name;
  Node args;  ///< undefined when the config gave no args
  Node node;  ///< the whole mapping, for messages

  bool empty() const { return name.empty(); }
};

/// Parses `{name, args}`; `what` names the slot in messages ("sampler").
ComponentSpec parse_component(const Node& node, const std::string& what);

}  // namespace oml::config
