#include "oml/config/reader.h"

#include "oml/config/args_check.h"
#include "oml/config/error_list.h"

#include <algorithm>

#include "oml/common/strings.h"

namespace oml::config {

MapReader::MapReader(Node map, std::string what, ErrorList* errors)
    : map_(std::move(map)), what_(std::move(what)), errors_(errors) {
  if (errors_ == nullptr && ArgsCheck::errors() != nullptr) {
    errors_ = ArgsCheck::errors();
    ends_args_check_ = ArgsCheck::claim_reader();
  }
  if (!map_.is_null() && !map_.is_map()) {
    map_.fail("expected a mapping of keys to values" + (what_.empty() ? "" : " for " + what_));
  }
}

Node MapReader::take(const std::string& key) {
  if (std::find(accepted_.begin(), accepted_.end(), key) == accepted_.end()) accepted_.push_back(key);
  return map_[key];
}

Node MapReader::take_either(const std::string& key, const std::string& alias) {
  Node first = take(key), second = take(alias);
  if (first.defined() && second.defined()) {
    map_.key_node(alias).fail("'" + alias + "' is another name of '" + key + "' (given at " +
                              map_.key_node(key).where() + "); keep one of them");
  }
  return first.defined() ? first : second;
}

Node MapReader::require(const std::string& key) {
  Node child = take(key);
  if (!child.defined()) {
    // A misspelt required key is both missing and unknown: point at the misspelling.
    std::vector<std::string> unknown;
    for (const auto& present : map_.keys()) {
      if (std::find(accepted_.begin(), accepted_.end(), present) == accepted_.end())
        unknown.push_back(present);
    }
    const std::string typo = closest_match(key, unknown);
    map_.fail(
        "missing required key '" + key + "'" + (what_.empty() ? "" : " in " + what_) +
        (typo.empty() ? "" : " (is '" + typo + "' at " + map_.key_node(typo).where() + " a misspelling?)"));
  }
  return child;
}

bool MapReader::has(const std::string& key) const { return map_.is_map() && map_[key].defined(); }

MapReader& MapReader::known(const std::vector<std::string>& keys) {
  for (const auto& key : keys) take(key);
  return *this;
}

void MapReader::guard(const std::function<void()>& read) {
  if (errors_ == nullptr) {
    read();
  } else {
    errors_->check(read);
  }
}

void MapReader::finish() const {
  for (const auto& key : map_.keys()) {
    if (std::find(accepted_.begin(), accepted_.end(), key) != accepted_.end()) continue;
    std::vector<std::string> sorted = accepted_;
    std::sort(sorted.begin(), sorted.end());
    const Node child = map_.key_node(key);
    const ConfigError unknown(child.describe() + ": unknown key '" + key + "'" +
                              (what_.empty() ? "" : " in " + what_) + did_you_mean(key, sorted) +
                              "; accepted keys: " + (sorted.empty() ? "(none)" : join(sorted)));
    if (errors_ == nullptr) throw unknown;
    errors_->add(unknown);
  }
  if (ends_args_check_) throw ArgsChecked{};
}

ComponentSpec parse_component(const Node& node, const std::string& what) {
  if (node.is_scalar()) {
    node.fail("expected a component mapping {name: ..., args: {...}} for " + what + ", got '" +
              node.yaml().Scalar() + "'");
  }
  MapReader reader(node, what);
  ComponentSpec spec;
  reader.required("name", spec.name);
  spec.args = reader.take("args");
  if (spec.args.defined() && !spec.args.is_null() && !spec.args.is_map()) {
    spec.args.fail("expected a mapping of arguments for " + what + " '" + spec.name + "'");
  }
  spec.node = node;
  reader.finish();
  return spec;
}

}  // namespace oml::config
