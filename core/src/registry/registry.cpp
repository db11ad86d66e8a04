#include "oml/registry/registry.h"

namespace oml::detail {

namespace {
// c10::Error messages carry a C++ backtrace after their first line.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
}  // namespace

void add_origin_context(Error& error, const std::string& kind, const ComponentInfo& info) {
  if (info.builtin()) return;
  error.add_context("(" + kind + " '" + info.name + "' comes from " + info.origin + ")");
}

void throw_foreign_error(const std::string& kind, const ComponentInfo& info, const std::string& what,
                         const std::string& during) {
  if (info.builtin()) {
    throw InternalError("built-in " + kind + " '" + info.name + "' failed " + during + ": " +
                        first_line(what));
  }
  throw PluginError(kind + " '" + info.name + "' from " + info.origin + " failed " + during + ": " +
                    first_line(what));
}

}  // namespace oml::detail
