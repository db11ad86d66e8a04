#pragma once
// The run config of a YAML text, and the ConfigError it gives, for the unit tests of config keys.

#include <string>

#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "support/support.h"

namespace oml::test {

/// `yaml` (named `name` in messages) parsed as a run config.
inline config::RunConfig parse_run_config_text(const std::string& yaml, const std::string& name) {
  const auto doc = config::Document::from_string(yaml, name);
  return config::parse_run_config(doc.root());
}

/// The ConfigError parsing `yaml` gives, with its context lines (several problems: what() counts
/// them, the context lines give each); a test failure when it gives none.
inline std::string run_config_error(const std::string& yaml, const std::string& name) {
  try {
    parse_run_config_text(yaml, name);
  } catch (const ConfigError& e) {
    return error_text(e);
  }
  FAIL("no ConfigError for:\n" << yaml);
  return "";
}

}  // namespace oml::test
