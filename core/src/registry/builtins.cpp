// Explicit registration of the components implemented in oml_core. Each layer provides one
// register_builtin_*() function; they are called here (never from static initialisers, which a
// linker may drop).
#include "oml/registry/registries.h"
#include "oml/retrieval/postprocessor.h"

namespace oml {

void register_core_components() {
  static bool done = false;
  if (done) return;
  done = true;
  retrieval::register_builtin_postprocessors(registries());
}

}  // namespace oml
