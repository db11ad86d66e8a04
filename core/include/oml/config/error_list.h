#pragma once
// Reporting every problem of a config at once (docs/configuration.md#errors-point-at-the-place-to-fix):
// independent checks run one after the other, their ConfigErrors are kept, and the command
// stops once with all of them, sorted by place, instead of at the first.
//
//   config::ErrorList errors;
//   errors.check([&] { reader.optional("seed", c.seed); });
//   errors.check([&] { registry.require(spec); });
//   errors.throw_if_any();   // one problem: that error as it is; several: one ConfigError listing them

#include <functional>
#include <vector>

#include "oml/common/error.h"

namespace oml::config {

/// Several problems of one config: what() gives their number, context() lists them by place.
class ConfigErrors : public ConfigError {
 public:
  explicit ConfigErrors(std::vector<ConfigError> parts);
  const std::vector<ConfigError>& parts() const { return parts_; }

 private:
  std::vector<ConfigError> parts_;
};

class ErrorList {
 public:
  /// Runs `check`; a ConfigError it throws is kept (the parts of a ConfigErrors one by one; other
  /// errors propagate). True when it passed.
  bool check(const std::function<void()>& check);
  void add(const ConfigError& error);
  bool empty() const { return errors_.empty(); }
  std::size_t size() const { return errors_.size(); }

  /// Nothing when empty. One error is thrown as it is; several become one ConfigErrors
  /// ("N problems in the config") with each message as a context line, in the order of their
  /// places (--set flags first, then file, line and column).
  void throw_if_any() const;

 private:
  std::vector<ConfigError> errors_;
};

}  // namespace oml::config
