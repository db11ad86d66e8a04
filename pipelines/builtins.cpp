#include "cli.h"
#include "oml/registry/registries.h"
#include "oml/samplers/builtin_samplers.h"

namespace oml::cli {

void register_builtins() {
  static bool done = false;
  if (done) return;
  done = true;
  register_core_components();
  samplers::register_builtin_samplers(registries());
}

}  // namespace oml::cli
