#pragma once
// One registry per component kind: name -> how to make the component, in two phases.
//
//   registries().miners.add("all_triplets",
//       [](config::ArgsReader& r) {                      // parse: args -> typed options
//         AllTripletsOptions o;
//         r.optional("max_output_triplets", o.max_output);
//         r.check([&] { check_options(o); });
//         return o;
//       },
//       [](const AllTripletsOptions& o, const NoContext&) {  // build: options + context -> product
//         return std::make_shared<AllTripletsMiner>(o);
//       },
//       "all valid triplets, randomly capped at max_output_triplets");
//   auto miner = registries().miners.create(spec);         // parse, then build
//
// The contract of the two phases, which every component (built-in or plugin) keeps:
//   - parse is pure: it reads the args into a typed options struct and checks their values,
//     with no context, nothing built, loaded or opened. Every problem goes to the error list
//     (unknown, mistyped and missing keys; values, as config::ArgumentError; nested components),
//     so that checking a whole config (cli.cpp's check_components) runs every parse and reports
//     all mistakes at once. The registry calls the reader's finish() after the parse.
//   - build makes the component from options its parse accepted and the run's context. It
//     reports no config error: an argument that does not fit the data or the run it meets is a
//     config::ArgumentMismatch (a DataError), placed at the argument like a parse error.
//
// Unknown names list the known ones and the closest match; registering a name twice names both
// origins. Built-ins are added by explicit register_builtin_*() calls, never by static
// initialisers (a linker may drop those from static libraries). What a phase throws reaches the
// caller the same way for every kind, built-in or plugin (see parse() and build()).

#include <any>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/config/error_list.h"
#include "oml/config/reader.h"

namespace oml {

const std::string& current_registration_origin();

/// Context for kinds whose components need nothing beyond their args to be built.
struct NoContext {};

/// Options of a component that takes no args (its parse only rejects unknown keys).
struct NoOptions {};
/// The parse of a component without args.
inline NoOptions no_args(config::ArgsReader&) { return {}; }

/// Description of one registered component, for listings and docs.
struct ComponentInfo {
  std::string name;
  std::string help;
  std::string origin;  ///< "built-in", or "plugin '<name>' (<library path>)"

  bool builtin() const { return origin == "built-in"; }
};

/// A component's args after its parse: the spec it came from and its typed options, ready to
/// build. `options` is empty when the parse found problems (they are in its error list).
template <class Product>
struct ParsedComponent {
  config::ComponentSpec spec;
  std::any options;

  bool ok() const { return options.has_value(); }
};

namespace detail {
/// "(<kind> '<name>' comes from plugin ...)" for a plugin's component; "" for a built-in.
std::string origin_note(const std::string& kind, const ComponentInfo& info);
/// Adds origin_note() to an oml error a plugin's component threw; nothing for built-ins.
void add_origin_context(Error& error, const std::string& kind, const ComponentInfo& info);
/// A foreign exception (not an oml error) escaped the component `info` (what `during` says):
/// PluginError naming the plugin library and the component, or InternalError for a built-in.
/// `what` is its message.
[[noreturn]] void throw_foreign_error(const std::string& kind, const ComponentInfo& info,
                                      const std::string& what, const std::string& during);
}  // namespace detail

template <class Product, class Context = NoContext>
class Registry {
 public:
  using Parsed = ParsedComponent<Product>;

  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  /// Registers `name`: `parse(config::ArgsReader&) -> Options` and
  /// `build(const Options&, const Context&) -> Product` (Options: any copyable struct).
  /// Throws PluginError naming both origins when the name is taken. `origin` defaults to
  /// current_registration_origin() (the plugin's path during loading).
  template <class Parse, class Build>
  void add(const std::string& name, Parse parse, Build build, std::string help, std::string origin = "") {
    using Options = std::decay_t<std::invoke_result_t<Parse&, config::ArgsReader&>>;
    static_assert(std::is_copy_constructible_v<Options>, "a component's options must be copyable");
    static_assert(
        std::is_convertible_v<std::invoke_result_t<Build&, const Options&, const Context&>, Product>,
        "build(const Options&, const Context&) must return the registry's product");
    if (origin.empty()) origin = current_registration_origin();
    OML_CHECK(!name.empty(), PluginError, "cannot register a ", kind_, " with an empty name (from ", origin,
              ")");
    const auto found = entries_.find(name);
    if (found != entries_.end()) {
      throw PluginError(kind_ + " '" + name + "' from " + origin + " clashes with the " + kind_ +
                        " of the same name from " + found->second.info.origin);
    }
    Entry entry;
    entry.parse = [parse](config::ArgsReader& reader) -> std::any { return std::any(parse(reader)); };
    entry.build = [build](const std::any& options, const Context& context) -> Product {
      return build(std::any_cast<const Options&>(options), context);
    };
    entry.info = ComponentInfo{name, std::move(help), std::move(origin)};
    entries_.emplace(name, std::move(entry));
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

  /// Phase 1: the typed options of `spec`, every problem collected in `errors` (none thrown):
  /// an unknown name; what the component's parse reads badly or rejects, at its place
  /// (config::ArgumentError at the argument; a plugin's with a line naming the plugin); keys
  /// it never read. The result is ok() only when none of these was found. A foreign exception
  /// from the parse is thrown as PluginError (plugin) or InternalError (built-in).
  Parsed parse(const config::ComponentSpec& spec, config::ErrorList& errors) const {
    Parsed parsed{spec, {}};
    if (!errors.check([&] { require(spec); })) return parsed;
    const Entry& entry = entries_.find(spec.name)->second;
    errors.check([&] {
      config::ArgsReader reader(spec.args, kind_ + " '" + spec.name + "'", errors);
      reader.set_origin_note(detail::origin_note(kind_, entry.info));
      // Keys are unknown only once the parse has read all it reads.
      if (parse_into(entry, reader, parsed)) reader.finish();
      if (!reader.ok()) parsed.options.reset();
    });
    return parsed;
  }

  /// parse() of `name` for components that share one args mapping (the metrics read their keys
  /// from `metric_args:`): the parse reads through `reader`, whose owner calls finish() once
  /// every component has read its keys. Problems go to the reader's error list. `read_all` is
  /// set false when the parse threw before it returned (it may have left keys unread).
  Parsed parse_shared(const std::string& name, config::ArgsReader& reader, bool& read_all) const {
    Parsed parsed{config::ComponentSpec{name, reader.node(), reader.node()}, {}};
    if (!reader.errors().check([&] { require(parsed.spec); })) return parsed;
    const Entry& entry = entries_.find(name)->second;
    reader.begin(kind_ + " '" + name + "'");
    reader.set_origin_note(detail::origin_note(kind_, entry.info));
    if (!parse_into(entry, reader, parsed)) read_all = false;
    return parsed;
  }

  /// Phase 2: the component from options its parse accepted (InternalError otherwise). What
  /// its build throws reaches the caller as:
  ///   - config::ArgumentMismatch (config::check_fits): a DataError with the argument's place
  ///     in `parsed.spec.args` in front;
  ///   - any other oml error: unchanged, so its type and exit code stay; from a plugin's
  ///     component with a context line naming the plugin;
  ///   - anything else: PluginError naming the plugin library and the component, or, from a
  ///     built-in, InternalError (a bug in oml-cpp).
  Product build(const Parsed& parsed, const Context& context = Context{}) const {
    const auto found = entries_.find(parsed.spec.name);
    OML_ASSERT(parsed.ok() && found != entries_.end(), kind_, " '", parsed.spec.name,
               "' built from args its parse did not accept");
    const Entry& entry = found->second;
    try {
      return entry.build(parsed.options, context);
    } catch (const config::ArgumentMismatch& e) {
      DataError placed = config::place_argument_error<DataError>(parsed.spec.args, e);
      detail::add_origin_context(placed, kind_, entry.info);
      throw placed;
    } catch (const config::ArgumentError& e) {
      // Against the contract (its parse should have found it), but the user still gets the place.
      ConfigError placed = config::place_argument_error<ConfigError>(parsed.spec.args, e);
      detail::add_origin_context(placed, kind_, entry.info);
      throw placed;
    } catch (...) {
      rethrow_with_origin(entry, std::current_exception(), "while being built");
    }
  }

  /// parse() then build(): the component named by `spec`, or the parse's problems thrown
  /// (config::ErrorList::throw_if_any: one as it is, several as one ConfigErrors).
  Product create(const config::ComponentSpec& spec, const Context& context = Context{}) const {
    config::ErrorList errors;
    const Parsed parsed = parse(spec, errors);
    errors.throw_if_any();
    return build(parsed, context);
  }

  /// Removes every entry (tests only).
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    std::function<std::any(config::ArgsReader&)> parse;
    std::function<Product(const std::any&, const Context&)> build;
    ComponentInfo info;
  };

  // Runs the entry's parse into parsed.options (left empty when `reader` recorded a problem);
  // what it throws is collected in the reader's list or rethrown as parse() says. True when
  // the parse returned (rather than threw).
  bool parse_into(const Entry& entry, config::ArgsReader& reader, Parsed& parsed) const {
    config::ErrorList& errors = reader.errors();
    try {
      try {
        std::any options = entry.parse(reader);
        if (reader.ok()) parsed.options = std::move(options);
        return true;
      } catch (const ConfigError&) {
        // A check that failed after a key read badly judged a default: the key's error says it.
        if (reader.keys_ok()) throw;
      }
    } catch (const config::ArgumentError& e) {
      ConfigError placed = config::place_argument_error<ConfigError>(parsed.spec.args, e);
      detail::add_origin_context(placed, kind_, entry.info);
      errors.add(placed);
    } catch (ConfigError& e) {
      detail::add_origin_context(e, kind_, entry.info);
      errors.add(e);
    } catch (...) {
      rethrow_with_origin(entry, std::current_exception(), "while reading its args");
    }
    return false;
  }

  // What a phase of `entry` threw, on its way to the caller: an oml error with the plugin's
  // origin line; anything else as PluginError (plugin) or InternalError (built-in).
  [[noreturn]] void rethrow_with_origin(const Entry& entry, const std::exception_ptr& thrown,
                                        const std::string& during) const {
    try {
      std::rethrow_exception(thrown);
    } catch (Error& e) {
      detail::add_origin_context(e, kind_, entry.info);
      throw;
    } catch (const std::exception& e) {
      detail::throw_foreign_error(kind_, entry.info, e.what(), during);
    } catch (...) {
      detail::throw_foreign_error(kind_, entry.info, "an exception that is not a std::exception", during);
    }
  }

  std::string kind_;
  std::map<std::string, Entry> entries_;
};

}  // namespace oml
