// Explicit registration of the components implemented in oml_core. Each layer provides one
// register_builtin_*() function; they are called here (never from static initialisers, which a
// linker may drop).
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/postprocessor.h"

namespace oml {

void register_core_components() {
  static bool done = false;
  if (done) return;
  done = true;
  data::register_builtin_transforms(registries());
  retrieval::register_builtin_postprocessors(registries());
}

}  // namespace oml
