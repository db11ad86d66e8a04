#pragma once
// The one exception hierarchy of oml-cpp (exit codes: docs/contracts.md#exit-codes).
//
// Every error a user can cause or meet derives from oml::Error. Each command's main() catches
// oml::Error once, prints `what()` and the context lines, and exits with `exit_code()`:
//   2 — the user must change something (usage, config, data, plugin): ConfigError, DataError,
//       PluginError, UsageError;
//   1 — a failure while running: RuntimeError, DistributedError, InternalError.
// Messages name the file / key / row / rank involved and say what was expected.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace oml {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  ~Error() override = default;

  /// Short name of the error family, printed in front of the message ("config error").
  virtual const char* kind() const noexcept = 0;
  /// Process exit code for a command that ends with this error.
  virtual int exit_code() const noexcept = 0;

  /// Extra lines printed after the message (hints, listings). Returns *this for chaining.
  Error& add_context(std::string line) {
    context_.push_back(std::move(line));
    return *this;
  }
  const std::vector<std::string>& context() const noexcept { return context_; }

 private:
  std::vector<std::string> context_;
};

#define OML_DEFINE_ERROR(Name, kind_text, code)                      \
  class Name : public Error {                                        \
   public:                                                           \
    explicit Name(const std::string& message) : Error(message) {}    \
    const char* kind() const noexcept override { return kind_text; } \
    int exit_code() const noexcept override { return code; }         \
  };

OML_DEFINE_ERROR(UsageError, "usage error", 2)
OML_DEFINE_ERROR(ConfigError, "config error", 2)
OML_DEFINE_ERROR(DataError, "data error", 2)
OML_DEFINE_ERROR(PluginError, "plugin error", 2)
OML_DEFINE_ERROR(RuntimeError, "error", 1)
OML_DEFINE_ERROR(DistributedError, "distributed error", 1)
OML_DEFINE_ERROR(InternalError, "internal error", 1)

#undef OML_DEFINE_ERROR

/// A config value found wrong by a layer that takes typed options and does not know the config
/// file (the Trainer, retrieval, metrics): `key` is its dotted path in the run config
/// ("scheduling.monitor_metric"); what() is "key: message". The command places it at the key's
/// file:line:column (config::placing_settings); exit 2 like every config error.
class SettingError : public ConfigError {
 public:
  SettingError(std::string key, std::string message)
      : ConfigError(key + ": " + message), key_(std::move(key)), message_(std::move(message)) {}
  const std::string& key() const noexcept { return key_; }
  /// The message without the key.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string key_;
  std::string message_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace oml

/// Throws `ErrorType` with the streamed arguments as message when `cond` is false:
///   OML_CHECK(k > 1, ConfigError, "sampler 'balance': n_instances must be > 1, got ", k);
#define OML_CHECK(cond, ErrorType, ...)                           \
  do {                                                            \
    if (!(cond)) {                                                \
      throw ::oml::ErrorType(::oml::detail::concat(__VA_ARGS__)); \
    }                                                             \
  } while (false)

/// Broken invariant inside oml-cpp itself (not the user's fault): names the condition and place.
#define OML_ASSERT(cond, ...)                                                                               \
  do {                                                                                                      \
    if (!(cond)) {                                                                                          \
      throw ::oml::InternalError(::oml::detail::concat("internal check failed: " #cond " at " __FILE__ ":", \
                                                       __LINE__, ". ", ##__VA_ARGS__));                     \
    }                                                                                                       \
  } while (false)
