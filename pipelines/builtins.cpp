#include "cli.h"
#include "oml/registry/registries.h"

namespace oml::cli {

void register_builtins() {
  static bool done = false;
  if (done) return;
  done = true;
  register_core_components();
}

}  // namespace oml::cli
