#pragma once
// One registry per component kind: name -> factory building the component from its YAML args.
//
//   registries().samplers.add("balance", make_balance, "P x K batches ...");
//   auto sampler = registries().samplers.create(spec, context);
//
// Unknown names list the known ones and the closest match; registering a name twice names both
// origins. Built-ins are added by explicit register_builtin_*() calls, never by static
// initialisers (a linker may drop those from static libraries). create() reports what a
// factory throws the same way for every kind, built-in or plugin (see there).

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/args_check.h"
#include "oml/config/argument_error.h"
#include "oml/config/error_list.h"
#include "oml/config/reader.h"

namespace oml {

const std::string& current_registration_origin();

/// Context for kinds whose factories need nothing beyond their args.
struct NoContext {};

/// Description of one registered component, for listings and docs.
struct ComponentInfo {
  std::string name;
  std::string help;
  std::string origin;  ///< "built-in", or "plugin '<name>' (<library path>)"

  bool builtin() const { return origin == "built-in"; }
};

namespace detail {
/// Adds "(<kind> '<name>' from plugin ...)" to an oml error a plugin's factory threw; nothing
/// for built-ins.
void add_origin_context(Error& error, const std::string& kind, const ComponentInfo& info);
/// A foreign exception (not an oml error) escaped the component `info` (its factory, or what
/// `during` says): PluginError naming the plugin library and the component, or InternalError
/// for a built-in. `what` is its message.
[[noreturn]] void throw_foreign_error(const std::string& kind, const ComponentInfo& info,
                                      const std::string& what,
                                      const std::string& during = "while being built");
}  // namespace detail

template <class Product, class Context = NoContext>
class Registry {
 public:
  /// Builds the component from its `args:` node (possibly undefined = no args given).
  using Factory = std::function<Product(const config::Node& args, const Context& context)>;

  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  /// Registers `name`. Throws PluginError naming both origins when the name is taken.
  /// `origin` defaults to current_registration_origin() (the plugin's path during loading).
  void add(const std::string& name, Factory factory, std::string help, std::string origin = "") {
    if (origin.empty()) origin = current_registration_origin();
    OML_CHECK(!name.empty(), PluginError, "cannot register a ", kind_, " with an empty name (from ", origin,
              ")");
    const auto found = entries_.find(name);
    if (found != entries_.end()) {
      throw PluginError(kind_ + " '" + name + "' from " + origin + " clashes with the " + kind_ +
                        " of the same name from " + found->second.info.origin);
    }
    entries_.emplace(name,
                     Entry{std::move(factory), ComponentInfo{name, std::move(help), std::move(origin)}});
  }

  bool contains(const std::string& name) const { return entries_.count(name) > 0; }

  /// Sorted names.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }

  std::vector<ComponentInfo> infos() const {
    std::vector<ComponentInfo> out;
    for (const auto& kv : entries_) out.push_back(kv.second.info);
    return out;
  }

  const std::string& kind() const { return kind_; }

  /// Throws ConfigError at the spec's place when its name is not registered: the message lists
  /// the known names and the closest one.
  void require(const config::ComponentSpec& spec) const {
    if (contains(spec.name)) return;
    const std::string where = spec.node.defined() ? spec.node["name"].describe() + ": " : "";
    throw ConfigError(where + "unknown " + kind_ + " '" + spec.name + "'" + did_you_mean(spec.name, names()) +
                      "; known " + kind_ + "s: " + (entries_.empty() ? "(none)" : join(names())));
  }

  /// Builds the component named by `spec`. Unknown name -> ConfigError (see require()).
  /// What the factory throws reaches the caller as:
  ///   - config::ArgumentError (config::fail_argument): a ConfigError with the argument's
  ///     place in `spec.args` in front (config/argument_error.h);
  ///   - any other oml error: unchanged, so its type and exit code stay (ConfigError and
  ///     DataError exit with 2); from a plugin's factory with a context line naming the plugin;
  ///   - anything else: PluginError naming the plugin library and the component, or, from a
  ///     built-in factory, InternalError (a bug in oml-cpp).
  ///
  /// During an args check (a factory checked by check_args() builds a nested component) the
  /// nested component is checked instead and an empty Product comes back.
  Product create(const config::ComponentSpec& spec, const Context& context = Context{}) const {
    if (config::ErrorList* errors = config::ArgsCheck::errors()) {
      check_args(spec, *errors);
      return Product{};
    }
    require(spec);
    const Entry& entry = entries_.find(spec.name)->second;
    try {
      return entry.factory(spec.args, context);
    } catch (const config::ArgumentError& e) {
      ConfigError placed = config::place_argument_error(spec.args, e);
      detail::add_origin_context(placed, kind_, entry.info);
      throw placed;
    } catch (Error& e) {
      detail::add_origin_context(e, kind_, entry.info);
      throw;
    } catch (const std::exception& e) {
      detail::throw_foreign_error(kind_, entry.info, e.what());
    } catch (...) {
      detail::throw_foreign_error(kind_, entry.info, "an exception that is not a std::exception");
    }
  }

  /// Everything create() would report about `spec` that its args alone can tell, collected in
  /// `errors` instead of thrown, without building anything: an unknown name, and for built-in
  /// components every unknown, mistyped or missing argument and the same of nested components
  /// (config/args_check.h). Checks of values a factory makes after reading its args, and
  /// plugins' args, are reported by create().
  void check_args(const config::ComponentSpec& spec, config::ErrorList& errors) const {
    if (!errors.check([&] { require(spec); })) return;
    const Entry& entry = entries_.find(spec.name)->second;
    if (!entry.info.builtin()) return;  // a plugin's factory may do work before reading its args
    config::ArgsCheck check(errors);
    try {
      (void)entry.factory(spec.args, Context{});
    } catch (const config::ArgsChecked&) {
      // The factory read all its args and stopped before building.
    } catch (const config::ArgumentError& e) {
      errors.add(config::place_argument_error(spec.args, e));
    } catch (const ConfigError& e) {
      errors.add(e);
    } catch (const std::exception&) {
      // Past its args (a factory without a reader needs its context): create() will tell.
    }
  }

  /// Removes every entry (tests only).
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    Factory factory;
    ComponentInfo info;
  };
  std::string kind_;
  std::map<std::string, Entry> entries_;
};

}  // namespace oml
