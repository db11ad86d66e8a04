// `--set key.path=value` (document.h): one place changes, also when the file shares the value
// through a YAML alias or a merge key.
#include <map>
#include <string>
#include <vector>

#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "yaml_tree.h"

namespace oml::config {

using detail::is_index;
using detail::load_one_document;
using detail::prepare_tree;
using detail::to_index;

namespace {

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
    value = value_text.empty() ? YAML::Node(YAML::NodeType::Null) : load_one_document(value_text);
    prepare_tree<UsageError>(value, "--set " + trim(assignment.substr(0, eq)));
  } catch (const YAML::Exception& e) {
    throw UsageError("--set " + path + ": value '" + value_text + "' is not valid YAML: " + e.msg);
  }
  const std::vector<std::string> parts = split(path, '.');
  if (parts.size() > static_cast<std::size_t>(detail::kMaxDepth)) {
    throw UsageError("--set " + path.substr(0, 60) + "...: the key path has " + std::to_string(parts.size()) +
                     " parts; a config nests at most " + std::to_string(detail::kMaxDepth) + " levels");
  }
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
  if (cur.IsSequence() && !is_index(last)) {
    throw UsageError("--set " + path + ": '" + walked + "' is a list of " + std::to_string(cur.size()) +
                     " items, numbered from 0; got '" + last + "'");
  }
  if (cur.IsSequence()) {
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

}  // namespace oml::config
