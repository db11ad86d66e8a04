#include "oml/config/document.h"

#include <algorithm>
#include <map>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "composition.h"
#include "oml/common/strings.h"

namespace oml::config {

namespace {

bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

/// The value of an is_index() key; one too large for size_t is past the end of every list
/// (std::stoul threw std::out_of_range for `--set a.18446744073709551616=x`).
std::size_t to_index(const std::string& s) {
  errno = 0;
  const unsigned long long value = std::strtoull(s.c_str(), nullptr, 10);
  return errno == ERANGE || value > std::numeric_limits<std::size_t>::max()
             ? std::numeric_limits<std::size_t>::max()
             : static_cast<std::size_t>(value);
}

// A config's tree is bounded: YAML aliases share nodes, so a few lines can describe a tree of
// billions of nodes, or (an alias inside its own anchor) an infinite one.
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxNodes = 200000;

std::string at_mark(const std::string& name, const YAML::Mark& mark) {
  if (mark.line < 0 || name.rfind("--set ", 0) == 0) return name;  // a --set value: the flag names it
  return name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// Walks the tree once: a key given twice in a mapping, a tree deeper than kMaxDepth (a
/// recursive alias) or larger than kMaxNodes (nested aliases) is a ConfigError (`Error` for
/// --set values) naming the place. Python's YAML takes the last of duplicate keys and yaml-cpp
/// the first: neither is what a user who wrote both meant.
template <class Error>
void check_tree(const YAML::Node& node, const std::string& name, int depth, std::size_t& nodes) {
  if (++nodes > kMaxNodes) {
    throw Error(at_mark(name, node.Mark()) + ": the config expands to more than " +
                std::to_string(kMaxNodes) + " values (nested YAML aliases?)");
  }
  if (depth > kMaxDepth) {
    throw Error(at_mark(name, node.Mark()) + ": the config nests deeper than " + std::to_string(kMaxDepth) +
                " levels (a YAML alias used inside its own anchor?)");
  }
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& item : node) {
      const std::string key = item.first.IsScalar() ? item.first.Scalar() : std::string();
      if (item.first.IsScalar()) {
        const auto [it, inserted] = seen.emplace(key, item.first.Mark());
        if (!inserted) {
          throw Error(at_mark(name, item.first.Mark()) + ": key '" + key +
                      "' is given twice in this mapping (" +
                      (it->second.line >= 0 ? "first on line " + std::to_string(it->second.line + 1)
                                            : std::string("first above")) +
                      "); keep one of them");
        }
      }
      check_tree<Error>(item.second, name, depth + 1, nodes);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) check_tree<Error>(item, name, depth + 1, nodes);
  }
}

bool is_merge_key(const YAML::Node& key) {
  // A quoted "<<" is a plain key (its tag is "!"); yaml-cpp gives a plain scalar the tag "?".
  return key.IsScalar() && key.Scalar() == "<<" && key.Tag() != "!";
}

/// YAML merge keys (`<<: *defaults`, `<<: [*a, *b]`), which yaml-cpp keeps as a key named "<<":
/// the mapping gets each key of the merged mappings that it does not set itself, the first
/// merged mapping winning among them (as Python's YAML). Merged values are the merged
/// mappings' own nodes, so messages about them keep their lines. Runs after check_tree, so the
/// tree is finite; a mapping reached twice (an alias) is merged on the first visit.
template <class Error>
void apply_merge_keys(YAML::Node node, const std::string& name) {
  if (node.IsSequence()) {
    for (auto item : node) apply_merge_keys<Error>(item, name);
    return;
  }
  if (!node.IsMap()) return;
  YAML::Node merged(YAML::NodeType::Undefined);
  for (auto item : node) {
    apply_merge_keys<Error>(item.second, name);  // a merged mapping may merge in turn
    if (is_merge_key(item.first)) merged.reset(item.second);
  }
  if (!merged.IsDefined()) return;
  std::vector<YAML::Node> sources;
  if (merged.IsSequence()) {
    for (const auto& source : merged) sources.push_back(source);
  } else {
    sources.push_back(merged);
  }
  for (const auto& source : sources) {
    if (!source.IsMap()) {
      throw Error(at_mark(name, merged.Mark()) +
                  ": a merge key '<<' takes a mapping or a list of mappings (<<: *defaults, "
                  "<<: [*a, *b]), got " +
                  (source.IsSequence() ? "a list"
                   : source.IsNull()   ? "nothing"
                                       : "'" + source.Scalar() + "'"));
    }
  }
  node.remove("<<");
  const YAML::Node& own = node;  // const lookups never insert
  for (const auto& source : sources) {
    for (const auto& item : source) {
      if (!own[item.first.Scalar()].IsDefined()) node[item.first] = item.second;
    }
  }
}

/// Parsed YAML made safe to walk: bounded (check_tree) and with merge keys applied.
template <class Error>
void prepare_tree(YAML::Node& root, const std::string& name) {
  std::size_t nodes = 0;
  check_tree<Error>(root, name, 0, nodes);
  apply_merge_keys<Error>(root, name);
}

}  // namespace

YAML::Node detail::parse_config_text(const std::string& text, const std::string& name) {
  try {
    YAML::Node root = YAML::Load(text);
    prepare_tree<ConfigError>(root, name);
    if (!root.IsDefined() || root.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!root.IsMap()) {
      throw ConfigError(name + ": expected a mapping of keys at the top level of the config");
    }
    return root;
  } catch (const YAML::Exception& e) {
    std::string where = name;
    if (e.mark.line >= 0) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    throw ConfigError(where + ": malformed YAML: " + e.msg);
  }
}

namespace {

// Resolution state for ${...} references.
class Interpolator {
 public:
  Interpolator(YAML::Node root, std::shared_ptr<const Origin> origin)
      : root_(std::move(root)), origin_(std::move(origin)) {}

  void run() { resolve_children(root_, ""); }

 private:
  static std::string join_path(const std::string& base, const std::string& key) {
    return base.empty() ? key : base + "." + key;
  }

  void resolve_children(YAML::Node node, const std::string& path) {
    if (node.IsMap()) {
      std::vector<std::string> keys;
      for (const auto& kv : node) keys.push_back(kv.first.Scalar());
      for (const auto& key : keys) node[key] = resolve(node[key], join_path(path, key));
    } else if (node.IsSequence()) {
      for (std::size_t i = 0; i < node.size(); ++i) {
        node[i] = resolve(node[i], join_path(path, std::to_string(i)));
      }
    }
  }

  // Returns the resolved value of `node` (found at `path`).
  YAML::Node resolve(YAML::Node node, const std::string& path) {
    if (!node.IsScalar()) {
      resolve_children(node, path);
      return node;
    }
    const std::string text = node.Scalar();
    if (text.find("${") == std::string::npos) return node;

    for (const auto& active : stack_) {
      if (active == path) {
        Node(node, path, origin_).fail("circular ${...} reference: " + join(stack_, " -> ") + " -> " + path);
      }
    }
    stack_.push_back(path);

    YAML::Node result;
    const std::size_t open = text.find("${");
    const std::size_t close = text.find('}', open);
    if (open == 0 && close == text.size() - 1 && text.find("${", 2) == std::string::npos) {
      // The whole value is one reference: take the referenced node with its type.
      result = YAML::Clone(lookup(node, path, text.substr(2, close - 2)));
    } else {
      std::string out;
      std::size_t pos = 0;
      while (true) {
        const std::size_t start = text.find("${", pos);
        if (start == std::string::npos) break;
        const std::size_t end = text.find('}', start);
        if (end == std::string::npos) {
          Node(node, path, origin_).fail("unterminated ${...} in '" + text + "'");
        }
        out += text.substr(pos, start - pos);
        YAML::Node target = lookup(node, path, text.substr(start + 2, end - start - 2));
        if (!target.IsScalar()) {
          Node(node, path, origin_)
              .fail("${" + text.substr(start + 2, end - start - 2) +
                    "} is not a scalar and cannot be spliced into text");
        }
        out += target.Scalar();
        pos = end + 1;
      }
      out += text.substr(pos);
      result = YAML::Node(out);
    }
    stack_.pop_back();
    return result;
  }

  YAML::Node lookup(const YAML::Node& from, const std::string& from_path, const std::string& ref) {
    const std::string key = trim(ref);
    if (key.rfind("now:", 0) == 0) return YAML::Node(format_now(from, from_path, key.substr(4)));
    YAML::Node target = find_path(root_, key);
    if (!target.IsDefined()) {
      Node(from, from_path, origin_).fail("${" + key + "} refers to a key that does not exist");
    }
    // The referenced value may itself contain references: resolve it in place first.
    YAML::Node resolved = resolve(target, key);
    return resolved;
  }

  // Hydra's `now` resolver: ${now:%Y-%m-%d_%H-%M-%S}.
  std::string format_now(const YAML::Node& from, const std::string& from_path, const std::string& format) {
    if (format.empty())
      Node(from, from_path, origin_).fail("${now:} needs a strftime format, e.g. ${now:%Y-%m-%d}");
    const std::time_t start = run_start_time();
    std::tm local{};
    localtime_r(&start, &local);
    char text[256];
    const std::size_t n = std::strftime(text, sizeof(text), format.c_str(), &local);
    if (n == 0) {
      Node(from, from_path, origin_)
          .fail("${now:" + format + "} formats to nothing (or more than 255 characters)");
    }
    return std::string(text, n);
  }

  YAML::Node root_;
  std::shared_ptr<const Origin> origin_;
  std::vector<std::string> stack_;
};

/// How many places of the tree `root` hold `target` itself: more than one for an anchor and its
/// aliases, or a mapping's value and the merge key that copied it elsewhere.
std::size_t places_of(const YAML::Node& root, const YAML::Node& target) {
  if (root.is(target)) return 1;
  std::size_t places = 0;
  if (root.IsMap()) {
    for (const auto& item : root) places += places_of(item.second, target);
  } else if (root.IsSequence()) {
    for (const auto& item : root) places += places_of(item, target);
  }
  return places;
}

/// Appends the entries of `from` to `into` (a mapping or list like it), each in a new slot of
/// `into` that holds the same value node.
void append_entries(YAML::Node into, const YAML::Node& from) {
  if (from.IsMap()) {
    for (const auto& item : from) into[item.first] = item.second;
  } else if (from.IsSequence()) {
    for (const auto& item : from) {
      into.push_back(YAML::Node());
      into[into.size() - 1] = static_cast<const YAML::Node&>(item);
    }
  }
}

/// A mapping or list of its own whose entries are `node`'s (a copy one level deep).
YAML::Node shallow_copy(const YAML::Node& node) {
  if (!node.IsMap() && !node.IsSequence()) return node;
  YAML::Node copy(node.Type());
  append_entries(copy, node);
  return copy;
}

/// Gives each entry of `container` a slot of its own, in the same order. yaml-cpp assigns
/// *through* a slot, so assigning to a slot that an alias shares would change every place that
/// shares it.
void own_slots(YAML::Node container) {
  const YAML::Node entries = shallow_copy(container);
  if (container.IsMap()) {
    for (const auto& item : entries) container.remove(item.first);
  } else if (container.IsSequence()) {
    for (std::size_t i = container.size(); i-- > 0;) container.remove(i);
  }
  append_entries(container, entries);
}

/// `--set` changes one place, also when the file shares the value through an alias or a merge
/// key: the slot `key` of `container` (which is the caller's own) is made to hold a node of its
/// own if other places share it. The copy has no line numbers; messages about it name the flag.
template <class Key>
YAML::Node own_child(const YAML::Node& root, YAML::Node container, const Key& key, bool copy) {
  YAML::Node child = container[key];
  if (!child.IsDefined() || places_of(root, child) <= 1) return child;
  own_slots(container);
  if (copy) container[key] = shallow_copy(child);
  return container[key];
}

}  // namespace

std::time_t run_start_time() {
  static const std::time_t start = [] {
    if (const char* given = std::getenv(kRunStartTimeVariable)) {
      char* end = nullptr;
      const long long seconds = std::strtoll(given, &end, 10);
      if (end != given && *end == '\0' && seconds > 0) return static_cast<std::time_t>(seconds);
    }
    return std::time(nullptr);
  }();
  return start;
}

YAML::Node find_path(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = root;  // shares identity with root's nodes
  for (const auto& part : split(path, '.')) {
    if (cur.IsMap()) {
      const YAML::Node& c = cur;
      YAML::Node next = c[part];
      if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
      cur.reset(next);
    } else if (cur.IsSequence() && is_index(part)) {
      const std::size_t i = to_index(part);
      if (i >= cur.size()) return YAML::Node(YAML::NodeType::Undefined);
      YAML::Node next = cur[i];
      cur.reset(next);
    } else {
      return YAML::Node(YAML::NodeType::Undefined);
    }
  }
  return cur;
}

std::string apply_override(YAML::Node& root, const std::string& assignment,
                           std::map<std::string, std::string>& created_by) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw UsageError("--set '" + assignment + "': expected key.path=value");
  }
  const std::string path = trim(assignment.substr(0, eq));
  const std::string value_text = assignment.substr(eq + 1);
  YAML::Node value;
  try {
    value = value_text.empty() ? YAML::Node(YAML::NodeType::Null) : YAML::Load(value_text);
    prepare_tree<UsageError>(value, "--set " + trim(assignment.substr(0, eq)));
  } catch (const YAML::Exception& e) {
    throw UsageError("--set " + path + ": value '" + value_text + "' is not valid YAML: " + e.msg);
  }
  const std::vector<std::string> parts = split(path, '.');
  for (const auto& part : parts) {
    if (part.empty()) throw UsageError("--set '" + assignment + "': empty key in path '" + path + "'");
  }
  YAML::Node cur = root;
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& part = parts[i];
    walked = walked.empty() ? part : walked + "." + part;
    YAML::Node next;
    if (cur.IsSequence() && is_index(part)) {
      const std::size_t idx = to_index(part);
      if (idx >= cur.size())
        throw UsageError("--set " + path + ": '" + walked + "' is past the end of the list");
      next.reset(own_child(root, cur, idx, true));
    } else if (cur.IsMap() || cur.IsNull()) {
      if (!cur[part].IsDefined() || cur[part].IsNull()) {
        own_child(root, cur, part, false);  // `x: *nothing` must not fill the anchor's null
        cur[part] = YAML::Node(YAML::NodeType::Map);
        created_by.emplace(walked, path);
      }
      next.reset(own_child(root, cur, part, true));
    } else {
      throw UsageError("--set " + path + ": cannot set a key below '" + walked + "', which is not a mapping");
    }
    if (!next.IsMap() && !next.IsSequence()) {
      throw UsageError("--set " + path + ": cannot set a key below '" + walked +
                       "', which is a value, not a mapping");
    }
    cur.reset(next);
  }
  const std::string& last = parts.back();
  if (cur.IsSequence() && is_index(last)) {
    const std::size_t idx = to_index(last);
    if (idx >= cur.size())
      throw UsageError("--set " + path + ": index " + last + " is past the end of the list");
    own_child(root, cur, idx, false);
    cur[idx] = value;
  } else {
    if (cur.IsMap()) own_child(root, cur, last, false);
    cur[last] = value;
  }
  return path;
}

void resolve_interpolations(YAML::Node& root, const std::shared_ptr<const Origin>& origin) {
  Interpolator(root, origin).run();
}

std::string dump_yaml(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str()) + "\n";
}

Document::Document(YAML::Node root, std::shared_ptr<Origin> origin)
    : root_(std::move(root)), origin_(std::move(origin)) {}

Document Document::from_file(const std::string& path, const std::vector<std::string>& overrides) {
  if (std::filesystem::is_directory(path)) {
    throw ConfigError("config file '" + path + "' is a folder; give the YAML file inside it (--config " +
                      path + "/<name>.yaml)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open config file '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return from_string(text.str(), path, overrides);
}

Document Document::from_string(const std::string& text, const std::string& name,
                               const std::vector<std::string>& overrides) {
  auto origin = std::make_shared<Origin>();
  origin->file = name;
  const YAML::Node primary = detail::parse_config_text(text, name);
  detail::Composition composed = detail::compose_defaults(primary, name, overrides, *origin);
  YAML::Node root = composed.root;
  for (const auto& assignment : overrides) {
    const auto& used = composed.used_overrides;
    if (std::find(used.begin(), used.end(), assignment) != used.end()) continue;  // chose a group's option
    origin->overridden.insert(apply_override(root, assignment, origin->created_by));
  }
  resolve_interpolations(root, origin);
  return Document(root, origin);
}

Node Document::root() const { return Node(root_, "", origin_); }

std::string Document::dump() const { return dump_yaml(root_); }

}  // namespace oml::config
