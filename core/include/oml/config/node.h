#pragma once
// A YAML value that remembers where it came from (file, line, column, dotted key path), so
// that every configuration error can point at the exact place the user has to fix.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "oml/common/error.h"

namespace oml::config {

/// Shared by all nodes of one loaded document.
struct Origin {
  std::string file;                  ///< the config file (or "<string>" for in-memory text)
  std::set<std::string> overridden;  ///< key paths replaced by `--set key=value`
  /// Mappings that a `--set a.b.c=v` created because the file did not have them ("a", "a.b"),
  /// with the assignment's key path ("a.b.c"): errors about them point at that flag.
  std::map<std::string, std::string> created_by;
  /// The option files that `defaults:` composed into the document, each with its parsed tree:
  /// a value that came from one of them is reported with that file's name.
  std::vector<std::pair<std::string, YAML::Node>> composed_files;
};

class Node {
 public:
  Node() = default;
  Node(YAML::Node yaml, std::string key_path, std::shared_ptr<const Origin> origin);

  const YAML::Node& yaml() const { return yaml_; }
  /// Dotted key path from the document root, e.g. "sampler.args.n_labels" ("" for the root).
  const std::string& path() const { return path_; }
  const std::string& file() const;
  /// "file.yaml:12:5" (1-based), or "--set sampler.args.n_labels" for overridden values.
  std::string where() const;
  /// "file.yaml:12:5: sampler.args.n_labels" — the prefix of every message about this node.
  std::string describe() const;

  bool defined() const { return yaml_.IsDefined(); }
  bool is_null() const { return !yaml_.IsDefined() || yaml_.IsNull(); }
  bool is_map() const { return yaml_.IsMap(); }
  bool is_sequence() const { return yaml_.IsSequence(); }
  bool is_scalar() const { return yaml_.IsScalar(); }
  std::size_t size() const { return yaml_.size(); }

  /// Child of a map (undefined Node when absent; keeps the path for messages).
  Node operator[](const std::string& key) const;
  /// Element of a sequence.
  Node operator[](std::size_t index) const;
  /// The key itself (not its value) of a map entry: messages about unknown keys point here.
  Node key_node(const std::string& key) const;
  /// Keys of a map, in document order.
  std::vector<std::string> keys() const;

  /// Typed value; throws ConfigError naming the place and the expected type on mismatch.
  /// Supported: bool, int, int64_t, float, double, std::string, std::vector<T>,
  /// std::optional<T> (null -> nullopt), std::map<std::string, T>.
  template <class T>
  T as() const;

  /// Throws ConfigError "<where>: <path>: <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string child_path(const std::string& key) const;

  YAML::Node yaml_;
  std::string path_;
  std::shared_ptr<const Origin> origin_;
};

namespace detail {
/// Whether `text` is an integer as YAML 1.1 (PyYAML, so OmegaConf) writes one: [-+] then decimal
/// digits, 0x hex or 0b binary, with '_' after the first digit ("1_000", "0x1F").
bool is_yaml_integer(const std::string& text);
bool scalar_to_bool(const Node& node);
int64_t scalar_to_int(const Node& node);
double scalar_to_double(const Node& node);
std::string scalar_to_string(const Node& node);

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class T>
struct is_string_map<std::map<std::string, T>> : std::true_type {};
}  // namespace detail

template <class T>
T Node::as() const {
  if constexpr (detail::is_optional<T>::value) {
    if (is_null()) return std::nullopt;
    return as<typename T::value_type>();
  } else if constexpr (std::is_same_v<T, bool>) {
    return detail::scalar_to_bool(*this);
  } else if constexpr (std::is_integral_v<T>) {
    const int64_t value = detail::scalar_to_int(*this);
    if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        value > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      fail("integer " + std::to_string(value) + " is out of range");
    }
    return static_cast<T>(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(detail::scalar_to_double(*this));
  } else if constexpr (std::is_same_v<T, std::string>) {
    return detail::scalar_to_string(*this);
  } else if constexpr (detail::is_vector<T>::value) {
    if (!is_sequence()) fail("expected a list");
    T out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back((*this)[i].template as<typename T::value_type>());
    return out;
  } else if constexpr (detail::is_string_map<T>::value) {
    if (!is_map()) fail("expected a mapping");
    T out;
    for (const auto& key : keys()) out.emplace(key, (*this)[key].template as<typename T::mapped_type>());
    return out;
  } else {
    static_assert(sizeof(T) == 0, "Node::as<T>: unsupported type");
  }
}

}  // namespace oml::config
