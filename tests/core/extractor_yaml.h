#pragma once
// What the extractors' unit tests share: an extractor built, or its args checked, from the YAML
// a user writes under `extractor:`.
#include <memory>
#include <string>

#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/models/extractor.h"
#include "oml/registry/registries.h"

namespace oml::test {

/// The errors the registry finds in `extractor: <yaml>` (its args' parse alone).
inline config::ErrorList parse_errors(const std::string& yaml) {
  const auto doc = config::Document::from_string("extractor: " + yaml, "model.yaml");
  config::ErrorList errors;
  (void)registries().extractors.parse(config::parse_component(doc.root()["extractor"], "extractor"), errors);
  return errors;
}

/// The extractor `extractor: <yaml>` builds, in eval mode.
inline std::shared_ptr<models::Extractor> extractor_from_yaml(const std::string& yaml) {
  const auto doc = config::Document::from_string("extractor: " + yaml, "model.yaml");
  auto model = registries().extractors.create(config::parse_component(doc.root()["extractor"], "extractor"));
  model->eval();
  return model;
}

}  // namespace oml::test
