#include "oml/common/failpoint.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "oml/common/error.h"

namespace oml {
namespace {

constexpr const char* kVariable = "OML_FAILPOINTS";

// name -> seconds to pause, from the environment (read once).
std::map<std::string, double> parse_failpoints(const char* text) {
  std::map<std::string, double> out;
  if (text == nullptr) return out;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    if (entry.empty()) continue;
    const std::size_t eq = entry.rfind('=');
    const std::string action = eq == std::string::npos ? "" : entry.substr(eq + 1);
    const std::string prefix = "pause:";
    char* end = nullptr;
    const double seconds =
        action.rfind(prefix, 0) == 0 ? std::strtod(action.c_str() + prefix.size(), &end) : -1.0;
    OML_CHECK(eq != std::string::npos && eq > 0 && end != nullptr && *end == '\0' && seconds >= 0,
              ConfigError, kVariable, ": expected entries NAME=pause:SECONDS separated by ',', got '", entry,
              "'");
    out[entry.substr(0, eq)] = seconds;
  }
  return out;
}

}  // namespace

void failpoint(const std::string& name) {
  static const char* const text = std::getenv(kVariable);
  if (text == nullptr) return;
  static const std::map<std::string, double> points = parse_failpoints(text);
  const auto found = points.find(name);
  if (found == points.end()) return;
  std::cerr << "failpoint " << name << ": pausing " << found->second << " s" << std::endl;
  std::this_thread::sleep_for(std::chrono::duration<double>(found->second));
}

}  // namespace oml
