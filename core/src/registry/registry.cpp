#include "oml/registry/registry.h"

namespace oml::detail {

std::string origin_note(const std::string& kind, const ComponentInfo& info) {
  if (info.builtin()) return "";
  return "(" + kind + " '" + info.name + "' comes from " + info.origin + ")";
}

void add_origin_context(Error& error, const std::string& kind, const ComponentInfo& info) {
  if (!info.builtin()) error.add_context(origin_note(kind, info));
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
