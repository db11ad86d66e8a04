#pragma once
// Every component a run config names, parsed once by its registry, and the run's metric table:
// what the pipelines build from, so that no component's args are read twice and no metric is
// configured twice.
//
//   config.components = std::make_shared<const ParsedComponents>(cli::check_components(config, errors));
//   auto extractor = registries().extractors.build(*config.components->extractor);   // build only
//
// cli::Invocation::load_config fills RunConfig::components after every check passed, so each
// slot the config gives holds options its parse accepted (ok()); a slot the config leaves out is
// empty. Library code that builds a component without a config keeps Registry::create.

#include <memory>
#include <optional>

#include "oml/registry/registries.h"

namespace oml::metrics {
class MetricTable;
}  // namespace oml::metrics

namespace oml {

struct ParsedComponents {
  using Transform = decltype(Registries::transforms)::Parsed;

  std::optional<Transform> transforms_train;
  std::optional<Transform> transforms_val;
  std::optional<Transform> transforms_extraction;
  std::optional<Transform> transforms_predict;
  std::optional<decltype(Registries::samplers)::Parsed> sampler;
  std::optional<decltype(Registries::extractors)::Parsed> extractor;
  std::optional<decltype(Registries::losses)::Parsed> criterion;
  std::optional<decltype(Registries::optimizers)::Parsed> optimizer;
  std::optional<decltype(Registries::schedulers)::Parsed> scheduler;  ///< scheduling.scheduler
  std::optional<decltype(Registries::postprocessors)::Parsed> postprocessor;
  std::optional<decltype(Registries::retrieval_backends)::Parsed> retrieval_backend;
  std::optional<decltype(Registries::pairwise_models)::Parsed> pairwise_model;
  std::optional<decltype(Registries::loggers)::Parsed> logger;
  /// Every registered metric configured from `metric_args:` (metrics::configure_metrics).
  std::shared_ptr<const metrics::MetricTable> metrics;
};

}  // namespace oml
