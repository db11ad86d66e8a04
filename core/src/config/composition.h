#pragma once
// Hydra's `defaults:` list, the part OML's configs use (docs/configuration.md#config-groups-defaults):
//
//   defaults:
//     - optimizer: sgd          # configs/optimizer/sgd.yaml placed under the key `optimizer`
//     - sampler: balance
//     - override miner: hard_triplets   # changes a group chosen elsewhere in the defaults tree
//     - optional logger: mine   # skipped when no folder has it
//     - transforms@transforms_val: norm_resize_torch   # placed under another key (a "package")
//     - common                  # a config without a group, merged where the list stands
//     - _self_                  # where this file's own keys go (at the end when not listed)
//
// Option files are searched in the primary config's folder, then in the `file://` folders of
// `hydra.searchpath`, then in the config groups oml-cpp ships (shipped_config_groups()). An option
// file may have a `defaults:` list of its own (groups relative to its own group, `/group` from the
// top) and a `# @package` header. Values merge as OmegaConf merges: mappings key by key, anything
// else replaced by the later value.

#include <filesystem>
#include <string>
#include <vector>

#include "oml/config/node.h"

namespace oml::config::detail {

/// The folder holding the config groups oml-cpp ships (criterion/, optimizer/, sampler/, ...):
/// `<prefix>/share/omlcpp/configs` next to an installed program, else the source tree's configs/.
std::filesystem::path shipped_config_groups();

/// Parsed YAML text made safe to walk (bounded, no duplicate keys, merge keys applied); a mapping
/// at the top (an empty text gives an empty mapping). Malformed -> ConfigError "name:line:col: ...".
/// Defined in yaml_tree.cpp.
YAML::Node parse_config_text(const std::string& text, const std::string& name);

/// The text of config file `path`; ConfigError "cannot open config file '...': <reason>".
std::string read_config_file(const std::filesystem::path& path);

/// The result of composing: the config, and the `--set` assignments that chose a group's option.
struct Composition {
  YAML::Node root;
  std::vector<std::string> used_overrides;
};

/// Composes `root`, the primary config read from `file`, with what its `defaults:` list names,
/// and removes the list. A `--set group=option` among `overrides` (Hydra's way of choosing an
/// option on the command line: a group of the defaults tree and a plain option name) chooses
/// that group's option and is returned in used_overrides; the caller applies the others. Each
/// option file read is added to `origin.composed_files`, so that messages about its values name
/// it. Problems (an unknown group or option, a malformed entry, a group chosen twice) are
/// ConfigErrors naming the entry, all of them at once. A config without `defaults:` is returned
/// as it is.
Composition compose_defaults(const YAML::Node& root, const std::string& file,
                             const std::vector<std::string>& overrides, Origin& origin);

}  // namespace oml::config::detail
