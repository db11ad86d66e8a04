#pragma once
// YAML trees made safe to walk (inside oml_core, not installed): the limits every config tree
// is checked against (depth, size, duplicate keys) and YAML merge keys, shared by loading a file
// (document.cpp, composition.cpp) and by --set values (overrides.cpp).

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

namespace oml::config::detail {

/// "12": a key path part that indexes a list.
bool is_index(const std::string& s);

/// The value of an is_index() key; one too large for size_t is past the end of every list.
std::size_t to_index(const std::string& s);

/// Parsed YAML made safe to walk: a key given twice in a mapping, a tree deeper than 64 levels
/// (a recursive alias) or larger than 200,000 values (nested aliases) is an `Error` naming the
/// place (`name`: the file, or "--set key" for an override's value); then merge keys
/// (`<<: *defaults`) are applied. `Error` is ConfigError or UsageError.
template <class Error>
void prepare_tree(YAML::Node& root, const std::string& name);

}  // namespace oml::config::detail
