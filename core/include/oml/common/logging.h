#pragma once
// Logging for commands and pipelines: one line per message on stderr, with the rank prefixed
// in multi-process runs ("[rank 1] ..."). Backed by spdlog; the header stays light.

#include <string>

namespace oml::log {

enum class Level { debug, info, warn, error, off };

/// Sets the rank shown in front of every line (-1: single process, no prefix) and the level.
void init(int rank = -1, Level level = Level::info);
void set_level(Level level);

void debug(const std::string& message);
void info(const std::string& message);
void warn(const std::string& message);
void error(const std::string& message);

}  // namespace oml::log
