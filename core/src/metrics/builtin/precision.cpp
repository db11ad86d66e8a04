// precision@k (docs/metrics.md): relevant items among the first k' over min(n_gt, k').
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::shared_ptr<Metric> make_precision(const config::Node& /*metric_args*/, const MetricContext& context) {
  return make_top_k_metric(context, "precision", {5}, precision_at_k);
}

}  // namespace oml::metrics::builtin
