#include "composition.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "../common/raw_io.h"
#include "oml/common/strings.h"
#include "oml/config/error_list.h"

#ifndef OML_SOURCE_CONFIGS_DIR
#define OML_SOURCE_CONFIGS_DIR ""
#endif

namespace oml::config::detail {

namespace fs = std::filesystem;

namespace {

// An option file may pull others in; a chain this deep is a loop the file-stack check missed
// (the same file reached under two names) or a mistake.
constexpr int kMaxNesting = 32;
// Files a composition reads in all. A plain config listed twice is read twice, so a few files
// that each list the next one twice compose 2^depth files; OML's configs compose about ten.
constexpr std::size_t kMaxComposedFiles = 1000;

std::string dotted(const std::string& group) {
  std::string out = group;
  std::replace(out.begin(), out.end(), '/', '.');
  return out;
}

std::string join_package(const std::string& parent, const std::string& child) {
  if (parent.empty()) return child;
  if (child.empty()) return parent;
  return parent + "." + child;
}

/// A package as written after `@` or in a `# @package` header, relative to the including
/// config's package `parent`; `_global_` is the top, `_here_` the parent's own place.
std::string resolve_package(const std::string& written, const std::string& parent,
                            const std::string& group_default) {
  if (written == "_global_") return "";
  if (starts_with(written, "_global_.")) return written.substr(9);
  if (written == "_group_") return group_default;
  if (written == "_here_") return parent;
  return join_package(parent, written);
}

/// OmegaConf's merge: `over`'s mappings merge into `base`'s key by key (keeping base's key
/// order, new keys after), anything else replaces. Neither input is changed: the result's values
/// are their nodes (so messages keep their files and lines) in mappings of its own.
YAML::Node merged(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return over;
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& item : base) {
    const YAML::Node later = over[item.first.Scalar()];
    out.force_insert(item.first, later.IsDefined() ? merged(item.second, later) : item.second);
  }
  for (const auto& item : over) {
    if (!base[item.first.Scalar()].IsDefined()) out.force_insert(item.first, item.second);
  }
  return out;
}

/// `content` placed at the dotted `package` of an otherwise empty tree.
YAML::Node placed(const YAML::Node& content, const std::string& package) {
  if (package.empty()) return content;
  YAML::Node tree = content;
  const std::vector<std::string> parts = split(package, '.');
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    YAML::Node outer(YAML::NodeType::Map);
    outer[*part] = tree;
    tree = outer;
  }
  return tree;
}

/// The `# @package X` header of an option file (Hydra's), if it has one before its first key.
std::optional<std::string> package_header(const std::string& text) {
  static const std::regex header(R"(^\s*#\s*@package\s+(\S+)\s*$)");
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_match(line, match, header)) return match[1].str();
    const std::string stripped = trim(line);
    if (!stripped.empty() && stripped[0] != '#') break;
  }
  return std::nullopt;
}

}  // namespace

std::string read_config_file(const fs::path& path) {
  errno = 0;
  std::optional<std::string> text = oml::detail::read_file(path.string());
  if (!text) {
    throw ConfigError("cannot open config file '" + path.string() +
                      "': " + (errno != 0 ? std::strerror(errno) : "not readable"));
  }
  return std::move(*text);
}

namespace {

/// `hydra.searchpath`'s `file://` folders (relative to where the command runs, as Hydra's);
/// `pkg://` entries name Python packages: OML's `pkg://oml.configs` is the shipped groups, which
/// are searched anyway, and the others are named in a notice (run_config.cpp).
std::vector<fs::path> searchpath_folders(const YAML::Node& root) {
  std::vector<fs::path> folders;
  // (Absent keys give nodes on which only IsDefined() may be called.)
  const YAML::Node hydra = root["hydra"];
  if (!hydra.IsDefined() || !hydra.IsMap()) return folders;
  const YAML::Node entries = hydra["searchpath"];
  if (!entries.IsDefined() || !entries.IsSequence()) return folders;
  for (const auto& entry : entries) {
    if (entry.IsScalar() && starts_with(entry.Scalar(), "file://"))
      folders.emplace_back(entry.Scalar().substr(7));
  }
  return folders;
}

/// One entry of a `defaults:` list, parsed.
struct Entry {
  YAML::Node node;  ///< the entry as written, for messages
  bool self = false;
  bool override_ = false;
  bool optional = false;
  bool absolute = false;               ///< `/group`: from the top, not relative to the including group
  std::string group;                   ///< as written (without `/`, `@package`); empty for a plain config
  std::optional<std::string> package;  ///< after `@`
  std::vector<std::string> options;    ///< none for `group: null`
};

/// Sets the file that messages name for as long as it lives.
class CurrentFile {
 public:
  CurrentFile(std::string& slot, const std::string& file) : slot_(slot), outer_(slot) { slot_ = file; }
  ~CurrentFile() { slot_ = outer_; }
  CurrentFile(const CurrentFile&) = delete;
  CurrentFile& operator=(const CurrentFile&) = delete;

 private:
  std::string& slot_;
  std::string outer_;
};

class Composer {
 public:
  Composer(std::vector<fs::path> search, const std::vector<std::string>& overrides, Origin& origin)
      : search_(std::move(search)), origin_(origin) {
    // Hydra's command-line choice `group=option`: a group path and a plain option name.
    static const std::regex choice(
        R"(^\s*([A-Za-z0-9_][A-Za-z0-9_/-]*)\s*=\s*([A-Za-z0-9_][A-Za-z0-9_./-]*)\s*$)");
    for (const auto& assignment : overrides) {
      std::smatch match;
      if (std::regex_match(assignment, match, choice)) {
        cli_choices_[match[1].str()] = {match[2].str(), assignment};
      }
    }
  }

  Composition run(const YAML::Node& root, const std::string& file) {
    Composition out;
    std::error_code ec;
    stack_.push_back(fs::weakly_canonical(file, ec).string());
    out.root = compose(root, file, "", "", 0, true);
    for (const auto& [group, choice] : override_entries_) {
      if (!used_groups_.count(group)) {
        errors_.add(ConfigError(
            choice.second + ": defaults: 'override " + group + "' has no entry for the group '" + group +
            "' in the defaults list to override; choose it with '- " + group + ": " + choice.first + "'"));
      }
    }
    for (const auto& [group, choice] : cli_choices_) {
      if (used_groups_.count(group)) out.used_overrides.push_back(choice.second);
    }
    errors_.throw_if_any();
    return out;
  }

 private:
  /// "file:line:column" of `node` in the file being composed.
  std::string place(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    if (mark.line < 0) return current_file_;
    return current_file_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  }

  [[noreturn]] void fail_at(const YAML::Node& node, const std::string& message) const {
    throw ConfigError(place(node) + ": defaults: " + message);
  }

  /// The config `config` (read from `file`, of group `group`, placed at `package`) with its
  /// defaults list composed, as a tree from the top.
  YAML::Node compose(const YAML::Node& config, const std::string& file, const std::string& group,
                     const std::string& package, int depth, bool primary) {
    const YAML::Node list = config["defaults"];
    if (!list.IsDefined()) return placed(config, package);
    const CurrentFile current(current_file_, file);
    YAML::Node self(YAML::NodeType::Map);
    for (const auto& item : config) {
      if (item.first.Scalar() != "defaults") self.force_insert(item.first, item.second);
    }
    std::vector<Entry> entries;
    if (!list.IsNull()) {
      if (!list.IsSequence()) {
        errors_.check([&] {
          fail_at(list, "expected a list of config groups (- optimizer: adam, - _self_), got " +
                            std::string(list.IsMap() ? "a mapping" : "'" + list.Scalar() + "'"));
        });
      } else {
        for (const auto& node : list) {
          errors_.check([&] { entries.push_back(parse_entry(node, primary)); });
        }
      }
    }
    const auto self_entries =
        std::count_if(entries.begin(), entries.end(), [](const Entry& e) { return e.self; });
    if (self_entries > 1) {
      errors_.check([&] { fail_at(list, "_self_ is listed more than once"); });
    }
    if (self_entries == 0) {  // Hydra 1.1 and later: the config's own keys win over its defaults
      Entry entry;
      entry.self = true;
      entries.push_back(entry);
    }
    YAML::Node result(YAML::NodeType::Map);
    for (const Entry& entry : entries) {
      if (entry.self) {
        result = merged(result, placed(self, package));
        continue;
      }
      if (entry.override_) continue;  // collected by parse_entry; applied where the group is chosen
      errors_.check([&] { result = merged(result, compose_entry(entry, group, package, depth)); });
    }
    return result;
  }

  Entry parse_entry(const YAML::Node& node, bool primary) {
    Entry entry;
    entry.node = node;
    std::string key;
    YAML::Node value(YAML::NodeType::Undefined);  // none for `- config_name`
    if (node.IsScalar()) {
      key = trim(node.Scalar());
      if (key == "_self_") {
        entry.self = true;
        return entry;
      }
    } else if (node.IsMap() && node.size() == 1) {
      key = trim(node.begin()->first.Scalar());
      value.reset(node.begin()->second);
    } else {
      fail_at(node, "an entry is `- group: option`, `- config_name` or `- _self_`");
    }
    for (const auto& [word, flag] : {std::pair<const char*, bool*>{"override ", &entry.override_},
                                     std::pair<const char*, bool*>{"optional ", &entry.optional}}) {
      if (starts_with(key, word)) {
        *flag = true;
        key = trim(key.substr(std::strlen(word)));
      }
    }
    if (const auto at = key.find('@'); at != std::string::npos) {
      entry.package = key.substr(at + 1);
      key = key.substr(0, at);
    }
    if (starts_with(key, "/")) {
      entry.absolute = true;
      key = key.substr(1);
    }
    if (!value.IsDefined()) {  // `- config_name`: a config without a group
      if (entry.override_ || entry.optional) fail_at(node, "'override' and 'optional' need `group: option`");
      entry.options.push_back(key);
      return entry;
    }
    entry.group = key;
    if (value.IsSequence()) {
      for (const auto& option : value) {
        if (!option.IsScalar()) fail_at(option, "expected option names in the list");
        entry.options.push_back(option.Scalar());
      }
    } else if (value.IsScalar()) {
      entry.options.push_back(value.Scalar());
    } else if (!value.IsNull()) {
      fail_at(value, "expected the name of an option of the group '" + key + "' (or null for none)");
    }
    check_name(node, entry.group, "group");
    for (const auto& option : entry.options) check_name(node, option, "option");
    if (entry.override_) {
      if (!primary) fail_at(node, "'override' is supported in the primary config's defaults list only");
      if (entry.options.size() != 1) fail_at(node, "'override " + key + "' takes one option");
      override_entries_[key] = {entry.options.front(), place(node)};
    }
    return entry;
  }

  void check_name(const YAML::Node& node, const std::string& name, const std::string& what) const {
    if (name.empty() || fs::path(name).is_absolute() || name.find("..") != std::string::npos ||
        name.find('\\') != std::string::npos) {
      fail_at(node, "'" + name + "' is not a valid " + what + " name (a relative name without '..')");
    }
  }

  YAML::Node compose_entry(const Entry& entry, const std::string& parent_group,
                           const std::string& parent_package, int depth) {
    if (depth >= kMaxNesting) {
      fail_at(entry.node, "defaults nest deeper than " + std::to_string(kMaxNesting) + " configs (a loop?)");
    }
    if (entry.group.empty()) {  // a plain config, merged where the list stands
      const std::string name = entry.options.front();
      const fs::path relative = parent_group.empty() || entry.absolute
                                    ? fs::path(name + ".yaml")
                                    : fs::path(parent_group) / (name + ".yaml");
      return compose_file(entry, find(entry, relative, parent_group), parent_group, parent_package,
                          parent_package, depth);
    }
    const std::string group =
        entry.absolute || parent_group.empty() ? entry.group : parent_group + "/" + entry.group;
    std::vector<std::string> options = entry.options;
    if (const auto cli = cli_choices_.find(group); cli != cli_choices_.end()) {
      options = {cli->second.first};
    } else if (const auto chosen = override_entries_.find(group); chosen != override_entries_.end()) {
      options = {chosen->second.first};
    }
    used_groups_.insert(group);
    const std::string default_package =
        entry.absolute ? dotted(entry.group) : join_package(parent_package, dotted(entry.group));
    const std::string package =
        entry.package ? resolve_package(*entry.package, parent_package, default_package) : default_package;
    // As Hydra, a group may be chosen once per package: `transforms@transforms_train` and
    // `transforms@transforms_val` are two choices.
    if (const auto [it, inserted] = chosen_at_.emplace(group + "@" + package, where(entry.node)); !inserted) {
      fail_at(entry.node, "the group '" + group + "' is chosen twice (first at " + it->second +
                              "); to change an option chosen elsewhere write '- override " + group +
                              ": <option>'");
    }
    YAML::Node result(YAML::NodeType::Map);
    for (const auto& option : options) {  // `group: null` chooses none
      const std::optional<fs::path> path = find(entry, fs::path(group) / (option + ".yaml"), group);
      if (!path) continue;  // optional and absent
      result = merged(result, compose_file(entry, path, group, package, parent_package, depth));
    }
    return result;
  }

  YAML::Node compose_file(const Entry& entry, const std::optional<fs::path>& path, const std::string& group,
                          const std::string& package, const std::string& parent_package, int depth) {
    if (!path) return YAML::Node(YAML::NodeType::Map);
    const std::string name = path->string();
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(*path, ec).string();
    if (std::find(stack_.begin(), stack_.end(), canonical) != stack_.end()) {
      fail_at(entry.node, "'" + name + "' is already being composed (a config that includes itself)");
    }
    if (origin_.composed_files.size() >= kMaxComposedFiles) {
      // Reported once; the entries still to come are skipped rather than each reported.
      if (std::exchange(too_many_files_, true)) return YAML::Node(YAML::NodeType::Map);
      fail_at(entry.node, "the defaults compose more than " + std::to_string(kMaxComposedFiles) +
                              " config files (a config listed more than once at several levels?)");
    }
    const std::string text = detail::read_config_file(*path);
    YAML::Node tree = parse_config_text(text, name);
    origin_.composed_files.emplace_back(name, tree);
    std::string own_package = package;
    if (const auto header = package_header(text); header && !entry.package) {
      own_package = resolve_package(*header, parent_package, package);
    }
    stack_.push_back(canonical);
    YAML::Node out = compose(tree, name, group, own_package, depth + 1, false);
    stack_.pop_back();
    return out;
  }

  /// The first folder of the search path holding `relative`; a ConfigError naming what exists
  /// instead when none does (nothing for an `optional` entry).
  std::optional<fs::path> find(const Entry& entry, const fs::path& relative, const std::string& group) const {
    for (const auto& folder : search_) {
      const fs::path candidate = folder / relative;
      std::error_code ec;
      if (fs::is_regular_file(candidate, ec)) return candidate;
    }
    if (entry.optional) return std::nullopt;
    std::vector<std::string> folders, options, groups;
    for (const auto& folder : search_) {
      folders.push_back(folder.string());
      std::error_code ec;
      for (const auto& item : fs::directory_iterator(folder / group, ec)) {
        if (item.path().extension() == ".yaml") options.push_back(item.path().stem().string());
      }
      for (const auto& item : fs::directory_iterator(folder, ec)) {
        if (item.is_directory(ec)) groups.push_back(item.path().filename().string());
      }
    }
    const auto unique = [](std::vector<std::string> names) {
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      return names;
    };
    std::string message = "no config '" + relative.string() + "' in " + join(folders);
    if (!options.empty()) {
      const std::string option = relative.stem().string();
      message +=
          "; the group '" + group + "' has " + join(unique(options)) + did_you_mean(option, unique(options));
    } else if (!group.empty()) {
      message += "; there is no group '" + group + "' there (groups: " + join(unique(groups)) + ")" +
                 did_you_mean(group, unique(groups));
    }
    fail_at(entry.node, message);
  }

  std::string where(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    return mark.line >= 0 ? current_file_ + ":" + std::to_string(mark.line + 1) : current_file_;
  }

  std::vector<fs::path> search_;
  Origin& origin_;
  ErrorList errors_;
  std::string current_file_;
  std::vector<std::string> stack_;
  /// group -> (option, the --set assignment)
  std::map<std::string, std::pair<std::string, std::string>> cli_choices_;
  /// group -> (option, the place of the `override` entry) from the primary config
  std::map<std::string, std::pair<std::string, std::string>> override_entries_;
  std::map<std::string, std::string> chosen_at_;  ///< group -> where its entry is
  std::set<std::string> used_groups_;
  bool too_many_files_ = false;  ///< kMaxComposedFiles was reached (and reported)
};

}  // namespace

fs::path shipped_config_groups() {
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = program.parent_path().parent_path() / "share" / "omlcpp" / "configs";
    if (fs::is_directory(installed, ec)) return installed;
  }
  return fs::path(OML_SOURCE_CONFIGS_DIR);
}

Composition compose_defaults(const YAML::Node& root, const std::string& file,
                             const std::vector<std::string>& overrides, Origin& origin) {
  if (!root["defaults"].IsDefined()) return {root, {}};
  // A user's own group folders next to their config come first, the shipped ones last.
  std::vector<fs::path> search;
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) {
    const fs::path folder = fs::path(file).parent_path();
    search.push_back(folder.empty() ? fs::path(".") : folder);
  }
  for (const auto& extra : searchpath_folders(root)) search.push_back(extra);
  search.push_back(shipped_config_groups());
  return Composer(std::move(search), overrides, origin).run(root, file);
}

}  // namespace oml::config::detail
