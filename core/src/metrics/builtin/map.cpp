// map@k (docs/metrics.md): mean of precision at each hit within the first k', normalised by hits.
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::shared_ptr<Metric> make_map(const config::Node& /*metric_args*/, const MetricContext& context) {
  return make_top_k_metric(context, "map", {5}, map_at_k);
}

}  // namespace oml::metrics::builtin
