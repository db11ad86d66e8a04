#include "oml/common/failpoint.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "oml/common/error.h"

namespace oml {
namespace {

constexpr const char* kVariable = "OML_FAILPOINTS";

// What a failpoint does: pause for `seconds`, fail as the environment would (RuntimeError), or
// throw as a bug would (std::runtime_error).
struct Action {
  enum class Kind { pause, fail, throws } kind = Kind::pause;
  double seconds = 0.0;
};

// name -> action, from the environment (read once).
std::map<std::string, Action> parse_failpoints(const char* text) {
  std::map<std::string, Action> out;
  if (text == nullptr) return out;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    if (entry.empty()) continue;
    const std::size_t eq = entry.rfind('=');
    const std::string action = eq == std::string::npos ? "" : entry.substr(eq + 1);
    const std::string prefix = "pause:";
    if (eq != std::string::npos && eq > 0 && (action == "fail" || action == "throw")) {
      out[entry.substr(0, eq)] = Action{action == "fail" ? Action::Kind::fail : Action::Kind::throws, 0.0};
      continue;
    }
    char* end = nullptr;
    const double seconds =
        action.rfind(prefix, 0) == 0 ? std::strtod(action.c_str() + prefix.size(), &end) : -1.0;
    OML_CHECK(eq != std::string::npos && eq > 0 && end != nullptr && *end == '\0' && seconds >= 0,
              ConfigError, kVariable,
              ": expected entries NAME=pause:SECONDS, NAME=fail or NAME=throw separated by ',', got '", entry,
              "'");
    out[entry.substr(0, eq)] = Action{Action::Kind::pause, seconds};
  }
  return out;
}

}  // namespace

void failpoint(const std::string& name) {
  static const char* const text = std::getenv(kVariable);
  if (text == nullptr) return;
  static const std::map<std::string, Action> points = parse_failpoints(text);
  const auto found = points.find(name);
  if (found == points.end()) return;
  if (found->second.kind == Action::Kind::fail) {
    std::cerr << "failpoint " << name << ": failing" << std::endl;
    throw RuntimeError("failpoint " + name + ": failed as " + kVariable + " asks");
  }
  if (found->second.kind == Action::Kind::throws)
    throw std::runtime_error("failpoint " + name + ": a failure injected by " + kVariable);
  std::cerr << "failpoint " << name << ": pausing " << found->second.seconds << " s" << std::endl;
  std::this_thread::sleep_for(std::chrono::duration<double>(found->second.seconds));
}

}  // namespace oml
