#pragma once
// The process-wide registries, one per component kind. Plugins add to these.
//
// The component interfaces are only forward-declared here so that including this header stays
// cheap; each kind's header (e.g. "oml/data/sampler.h") defines the interface and its contract.

#include <memory>

#include "oml/registry/registry.h"

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace oml {
namespace data {
class Sampler;
struct SamplerContext;
class Transform;
}  // namespace data
namespace models {
class Extractor;
class PairwiseModel;
}  // namespace models
namespace losses {
class Criterion;
struct CriterionContext;
class Miner;
}  // namespace losses
namespace optim {
struct OptimizerContext;
class Scheduler;
struct SchedulerContext;
}  // namespace optim
namespace retrieval {
class Postprocessor;
struct PostprocessorContext;
class RetrievalBackend;
struct BackendContext;
}  // namespace retrieval
namespace metrics {
class Metric;
}  // namespace metrics
namespace report {
class RunLogger;
struct LoggerContext;
}  // namespace report

struct Registries {
  Registry<std::shared_ptr<data::Sampler>, data::SamplerContext> samplers{"sampler"};
  Registry<std::shared_ptr<data::Transform>> transforms{"transform"};
  Registry<std::shared_ptr<models::Extractor>> extractors{"extractor"};
  Registry<std::shared_ptr<models::PairwiseModel>> pairwise_models{"pairwise model"};
  Registry<std::shared_ptr<losses::Criterion>, losses::CriterionContext> losses{"loss"};
  Registry<std::shared_ptr<losses::Miner>> miners{"miner"};
  Registry<std::shared_ptr<torch::optim::Optimizer>, optim::OptimizerContext> optimizers{"optimizer"};
  Registry<std::shared_ptr<optim::Scheduler>, optim::SchedulerContext> schedulers{"scheduler"};
  Registry<std::shared_ptr<retrieval::Postprocessor>, retrieval::PostprocessorContext> postprocessors{
      "postprocessor"};
  /// `retrieval_backend:` — who finds the top-k (oml/retrieval/backend.h).
  Registry<std::shared_ptr<retrieval::RetrievalBackend>, retrieval::BackendContext> retrieval_backends{
      "retrieval backend"};
  /// Every registered metric is configured from `metric_args:` (metrics/metric_table.h).
  Registry<std::shared_ptr<metrics::Metric>> metrics{"metric"};
  Registry<std::shared_ptr<report::RunLogger>, report::LoggerContext> loggers{"logger"};

  /// Calls `visit(kind_title, infos)` for every registry, in a fixed order (for listings).
  template <class Visitor>
  void for_each(Visitor&& visit) const {
    visit("samplers", samplers.infos());
    visit("transforms", transforms.infos());
    visit("extractors", extractors.infos());
    visit("pairwise_models", pairwise_models.infos());
    visit("losses", losses.infos());
    visit("miners", miners.infos());
    visit("optimizers", optimizers.infos());
    visit("schedulers", schedulers.infos());
    visit("postprocessors", postprocessors.infos());
    visit("retrieval_backends", retrieval_backends.infos());
    visit("metrics", metrics.infos());
    visit("loggers", loggers.infos());
  }
};

/// The registries of this process (one instance, inside liboml_core).
Registries& registries();

/// Origin recorded by Registry::add when none is given: "built-in", or the library path while
/// a plugin's register function runs.
const std::string& current_registration_origin();
void set_registration_origin(std::string origin);

}  // namespace oml
