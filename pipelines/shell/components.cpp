#include "shell/components.h"

#include "oml/data/transform.h"
#include "oml/losses/register.h"
#include "oml/metrics/register.h"
#include "oml/models/register.h"
#include "oml/optim/register.h"
#include "oml/registry/registries.h"
#include "oml/report/run_logger.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/postprocessor.h"
#include "oml/samplers/builtin_samplers.h"

namespace oml::cli {

void register_builtins() {
  static bool done = false;
  if (done) return;
  done = true;
  Registries& all = registries();
  data::register_builtin_transforms(all);
  retrieval::register_builtin_postprocessors(all);
  retrieval::register_builtin_retrieval_backends(all);
  models::register_builtin_models(all);
  losses::register_builtin_losses(all);
  optim::register_builtin_optim(all);
  metrics::register_builtin_metrics(all);
  report::register_builtin_loggers(all);
  samplers::register_builtin_samplers(all);
}

}  // namespace oml::cli
