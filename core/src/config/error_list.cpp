#include "oml/config/error_list.h"

#include <algorithm>
#include <regex>
#include <tuple>

namespace oml::config {

namespace {

// Where a message points: (0, 0, 0) for a --set flag or no place, (1, line, column) for
// "file:line:column: ...".
std::tuple<int, long, long> place_of(const std::string& message) {
  static const std::regex file_place("^[^ ]*?:([0-9]+):([0-9]+):");
  std::smatch match;
  if (std::regex_search(message, match, file_place)) {
    return {1, std::stol(match[1].str()), std::stol(match[2].str())};
  }
  return {0, 0, 0};
}

}  // namespace

bool ErrorList::check(const std::function<void()>& check) {
  try {
    check();
    return true;
  } catch (const ConfigError& e) {
    add(e);
    return false;
  }
}

ConfigErrors::ConfigErrors(std::vector<ConfigError> parts)
    : ConfigError(std::to_string(parts.size()) + " problems in the config (all of them, by place):"),
      parts_(std::move(parts)) {
  for (const auto& part : parts_) {
    add_context(part.what());
    for (const auto& line : part.context()) add_context("  " + line);
  }
}

void ErrorList::add(const ConfigError& error) {
  // A list thrown by a nested check contributes its problems one by one.
  if (const auto* several = dynamic_cast<const ConfigErrors*>(&error)) {
    for (const auto& part : several->parts()) errors_.push_back(part);
    return;
  }
  errors_.push_back(error);
}

void ErrorList::throw_if_any() const {
  if (errors_.empty()) return;
  if (errors_.size() == 1) throw errors_.front();
  std::vector<ConfigError> sorted = errors_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const ConfigError& a, const ConfigError& b) {
    return place_of(a.what()) < place_of(b.what());
  });
  throw ConfigErrors(std::move(sorted));
}

}  // namespace oml::config
