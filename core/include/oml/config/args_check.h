#pragma once
// Checking a component's `args:` without building the component, so that every problem of a
// config is reported at once (Registry::check_args, called for each component of the config
// before any work starts). While an ArgsCheck is alive on a thread:
//   - a MapReader made without an ErrorList of its own collects its problems (unknown keys,
//     wrong types, missing keys) in the check's list and goes on reading;
//   - the first MapReader the factory makes reads the factory's own args: its finish() ends the
//     factory by throwing ArgsChecked, before anything is built or loaded, so a factory must
//     finish() its reader before it uses its context or builds;
//   - a nested component (the factory calls Registry::create) is checked the same way and comes
//     back empty (a null product): a factory must not use it before its own finish().

namespace oml::config {

class ErrorList;

/// Thrown by the finish() that ends a checked factory. Not a std::exception on purpose: a
/// factory's own `catch (const std::exception&)` must not swallow it.
struct ArgsChecked {};

class ArgsCheck {
 public:
  /// Starts a check (nested checks stack); problems go to `errors`.
  explicit ArgsCheck(ErrorList& errors);
  ~ArgsCheck();
  ArgsCheck(const ArgsCheck&) = delete;
  ArgsCheck& operator=(const ArgsCheck&) = delete;

  /// The innermost running check's list on this thread; nullptr when no check runs.
  static ErrorList* errors();
  /// True once per check, for its first reader: the reader whose finish() ends the factory.
  static bool claim_reader();

 private:
  ErrorList& errors_;
  bool reader_claimed_ = false;
  ArgsCheck* outer_;
};

}  // namespace oml::config
