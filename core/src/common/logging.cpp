#include "oml/common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace oml::log {

namespace {
std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_logger_mt("oml");
    l->set_pattern("%^%l%$: %v");
    return l;
  }();
  return instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::off:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}
}  // namespace

void init(int rank, Level level) {
  auto& l = logger();
  if (rank >= 0) {
    l->set_pattern("[rank " + std::to_string(rank) + "] %^%l%$: %v");
  } else {
    l->set_pattern("%^%l%$: %v");
  }
  l->set_level(to_spdlog(level));
}

void set_level(Level level) { logger()->set_level(to_spdlog(level)); }

void debug(const std::string& message) { logger()->debug(message); }
void info(const std::string& message) { logger()->info(message); }
void warn(const std::string& message) { logger()->warn(message); }
void error(const std::string& message) { logger()->error(message); }

}  // namespace oml::log
