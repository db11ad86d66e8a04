// cmc@k (docs/metrics.md): 1 when a relevant item is among the first k retrieved, else 0.
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::shared_ptr<Metric> make_cmc(const config::Node& /*metric_args*/, const MetricContext& context) {
  return make_top_k_metric(context, "cmc", {1, 5}, cmc_at_k);
}

}  // namespace oml::metrics::builtin
