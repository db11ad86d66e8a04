#pragma once
// What a component's parse phase reads its `args:` with (oml/registry/registry.h).
//
//   [](config::ArgsReader& r) {
//     TripletOptions o;
//     r.optional("margin", o.margin).optional("reduction", o.reduction);
//     o.miner = r.nested(registries().miners, "miner", "all_triplets");
//     r.check([&] { check_options(o); });          // value checks: config::check_argument(...)
//     return o;
//   }
//
// Every problem is collected in the parse's error list and reading goes on (a bad key keeps its
// default), so one run of all parses reports every mistake of a config. The registry calls
// finish() after the parse returns: keys the parse never read are reported as unknown.

#include <functional>
#include <optional>
#include <string>

#include "oml/config/error_list.h"
#include "oml/config/reader.h"

namespace oml::config {

class ArgsReader : public MapReader {
 public:
  /// `component` names the component in messages ("loss 'arcface'"); problems go to `errors`.
  /// `what` names the mapping (default "<component> args"). Throws ConfigError when `args` is
  /// given but not a mapping.
  ArgsReader(const Node& args, std::string component, ErrorList& errors, const std::string& what = "");

  const std::string& component() const { return component_; }
  /// Starts the next component's parse on a reader shared by several (Registry::parse_shared):
  /// `component` names it in messages, and ok() counts its problems only.
  void begin(std::string component);
  /// A context line added to each problem check() reports ("(sampler 'x' comes from plugin
  /// ...)"); the registry sets it for plugins' components.
  void set_origin_note(std::string note) { origin_note_ = std::move(note); }
  ErrorList& errors() const { return errors_; }
  /// True while no problem of these args (or of a nested component's) has been recorded.
  bool ok() const { return errors_.size() == errors_at_start_; }
  /// True while none of this component's own keys read badly (nested components aside).
  bool keys_ok() const { return own_problems_ == 0; }

  /// Ends the reading and checks the values: call it once every key is read. It first reports
  /// the keys never read as unknown (finish(); not on a reader shared by several components),
  /// then runs `check` (value checks of the options, throwing ConfigError, typically
  /// config::check_argument) when every key of this component read well, and collects what it
  /// throws: an ArgumentError placed at its argument. After a bad or misspelt key the check
  /// would judge a default, not what the user wrote, so it is skipped (a nested component's
  /// problems do not skip it; a check that needs a nested component's options tests
  /// `parsed.ok()`).
  void check(const std::function<void()>& check);

  /// Parses the nested component at `key` (`miner: {name: ..., args: {...}}`) with `registry`
  /// into the same error list. When the key is absent or null: `fallback` with no args, or, with
  /// no fallback, a missing-key error. Build it with `registry.build(parsed, context)` in the
  /// owner's build.
  template <class Registry>
  typename Registry::Parsed nested(const Registry& registry, const std::string& key,
                                   const std::string& fallback = "") {
    std::optional<ComponentSpec> spec = nested_spec(key, fallback);
    if (!spec) return typename Registry::Parsed{};
    return registry.parse(*spec, errors_);
  }

 protected:
  void collect(ConfigError error) const override;

 private:
  std::optional<ComponentSpec> nested_spec(const std::string& key, const std::string& fallback);

  std::string component_;
  std::string origin_note_;
  ErrorList& errors_;
  std::size_t errors_at_start_;
  mutable std::size_t own_problems_ = 0;
  bool shared_ = false;  ///< begin() was called: several components read this mapping
};

/// The parse of a component whose options struct has a `check_options(const Options&)` (found in
/// the struct's namespace): `read(reader, options)` reads the keys over the struct's defaults,
/// then the values are checked (ArgsReader::check).
///
///   registry.add("contrastive", config::checked_parse<ContrastiveOptions>(
///       [](config::ArgsReader& r, ContrastiveOptions& o) { r.optional("pos_margin", o.pos_margin); }),
///       build_contrastive, "help");
template <class Options, class Read>
auto checked_parse(Read read) {
  return [read](ArgsReader& reader) {
    Options options;
    read(reader, options);
    reader.check([&] { check_options(options); });
    return options;
  };
}

}  // namespace oml::config
