#pragma once
// YAML trees made safe to walk (inside oml_core, not installed): the limits every config tree
// is checked against (depth, size, duplicate keys) and YAML merge keys, shared by loading a file
// (document.cpp, composition.cpp) and by --set values (overrides.cpp).

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

namespace oml::config::detail {

/// A config's tree nests at most this deep and holds at most this many values: YAML aliases and
/// ${...} references share or copy nodes, so a few lines can describe billions of values.
inline constexpr int kMaxDepth = 64;
inline constexpr std::size_t kMaxNodes = 200000;

/// "12": a key path part that indexes a list.
bool is_index(const std::string& s);

/// The value of an is_index() key; one too large for size_t is past the end of every list.
std::size_t to_index(const std::string& s);

/// The one YAML document of `text` (null for an empty text). Anything after it — a second
/// document (after `---` or `...`) or a stray character — is a YAML::ParserException at its
/// place, as in OmegaConf: yaml-cpp's Load would drop it without a word. Text nesting past the
/// parser's own guard is reported as such (yaml-cpp says "bad file").
YAML::Node load_one_document(const std::string& text);

/// Parsed YAML made safe to walk: a key given twice in a mapping, a tree deeper than 64 levels
/// (a recursive alias) or larger than 200,000 values (nested aliases) is an `Error` naming the
/// place (`name`: the file, or "--set key" for an override's value); then merge keys
/// (`<<: *defaults`) are applied. `Error` is ConfigError or UsageError.
template <class Error>
void prepare_tree(YAML::Node& root, const std::string& name);

}  // namespace oml::config::detail
