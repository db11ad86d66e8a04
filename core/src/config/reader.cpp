#include "oml/config/reader.h"

#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/config/error_list.h"

#include <algorithm>

#include "oml/common/strings.h"

namespace oml::config {

MapReader::MapReader(Node map, std::string what, ErrorList* errors)
    : map_(std::move(map)), what_(std::move(what)), errors_(errors) {
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
    // The misspelt key is named here; finish() need not report it again as unknown.
    if (!typo.empty()) accepted_.push_back(typo);
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
    return;
  }
  try {
    read();
  } catch (const ConfigErrors& e) {
    for (const ConfigError& part : e.parts()) collect(part);
  } catch (const ConfigError& e) {
    collect(e);
  }
}

void MapReader::collect(ConfigError error) const { errors_->add(error); }

void MapReader::finish() const {
  if (finished_) return;
  finished_ = true;
  for (const auto& key : map_.keys()) {
    if (std::find(accepted_.begin(), accepted_.end(), key) != accepted_.end()) continue;
    std::vector<std::string> sorted = accepted_;
    std::sort(sorted.begin(), sorted.end());
    const Node child = map_.key_node(key);
    const ConfigError unknown(child.describe() + ": unknown key '" + key + "'" +
                              (what_.empty() ? "" : " in " + what_) + did_you_mean(key, sorted) +
                              "; accepted keys: " + (sorted.empty() ? "(none)" : join(sorted)));
    if (errors_ == nullptr) throw unknown;
    collect(unknown);
  }
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

ArgsReader::ArgsReader(const Node& args, std::string component, ErrorList& errors, const std::string& what)
    : MapReader(args, what.empty() ? component + " args" : what, &errors),
      component_(std::move(component)),
      errors_(errors),
      errors_at_start_(errors.size()) {}

void ArgsReader::begin(std::string component) {
  component_ = std::move(component);
  errors_at_start_ = errors_.size();
  own_problems_ = 0;
  shared_ = true;
}

void ArgsReader::collect(ConfigError error) const {
  ++own_problems_;
  if (!origin_note_.empty()) error.add_context(origin_note_);
  errors_.add(error);
}

void ArgsReader::check(const std::function<void()>& check) {
  if (!shared_) finish();
  if (!keys_ok()) return;
  try {
    check();
  } catch (const ArgumentError& e) {
    collect(place_argument_error<ConfigError>(node(), e));
  } catch (const ConfigErrors& e) {
    for (const ConfigError& part : e.parts()) collect(part);
  } catch (const ConfigError& e) {
    collect(e);
  }
}

std::optional<ComponentSpec> ArgsReader::nested_spec(const std::string& key, const std::string& fallback) {
  std::optional<ComponentSpec> spec;
  custom([&] {
    const Node node = take(key);
    if (node.defined() && !node.is_null()) {
      spec = parse_component(node, component_ + " " + key);
    } else if (!fallback.empty()) {
      spec = ComponentSpec{fallback, Node(), Node()};
    } else if (node.defined()) {
      node.fail("expected a component {name: ..., args: {...}} for " + key + " of " + component_);
    } else {
      require(key);  // the missing-key error, pointing at a misspelling when there is one
    }
  });
  return spec;
}

}  // namespace oml::config
