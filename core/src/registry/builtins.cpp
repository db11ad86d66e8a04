// Explicit registration of the components implemented in oml_core. Each layer provides one
// register_builtin_*() function; they are called here (never from static initialisers, which a
// linker may drop).
#include "oml/data/transform.h"
#include "oml/losses/register.h"
#include "oml/metrics/register.h"
#include "oml/models/register.h"
#include "oml/optim/register.h"
#include "oml/registry/registries.h"
#include "oml/report/run_logger.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/postprocessor.h"

namespace oml {

void register_core_components() {
  static bool done = false;
  if (done) return;
  done = true;
  data::register_builtin_transforms(registries());
  retrieval::register_builtin_postprocessors(registries());
  retrieval::register_builtin_retrieval_backends(registries());
  models::register_builtin_models(registries());
  losses::register_builtin_losses(registries());
  optim::register_builtin_optim(registries());
  metrics::register_builtin_metrics(registries());
  report::register_builtin_loggers(registries());
}

}  // namespace oml
