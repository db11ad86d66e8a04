#include "oml/config/document.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "composition.h"

namespace oml::config {

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
  return from_string(detail::read_config_file(path), path, overrides);
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
