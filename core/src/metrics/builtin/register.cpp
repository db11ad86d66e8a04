// The built-in metrics. Adding one: a file in this folder with its factory, one line below, one
// row in docs/metrics.md (and docs/components.md).
#include "oml/metrics/register.h"

#include "oml/metrics/metric.h"
#include "oml/registry/registries.h"

namespace oml::metrics {

namespace builtin {
std::shared_ptr<Metric> make_cmc(const config::Node& metric_args, const MetricContext& context);
std::shared_ptr<Metric> make_precision(const config::Node& metric_args, const MetricContext& context);
std::shared_ptr<Metric> make_map(const config::Node& metric_args, const MetricContext& context);
std::shared_ptr<Metric> make_fnmr(const config::Node& metric_args, const MetricContext& context);
std::shared_ptr<Metric> make_pcf(const config::Node& metric_args, const MetricContext& context);
}  // namespace builtin

void register_builtin_metrics(Registries& registries) {
  auto& r = registries.metrics;
  r.add("cmc", builtin::make_cmc, "cmc_top_k=[1, 5]: 1 when a relevant item is among the first k; cmc/<k>");
  r.add("precision", builtin::make_precision,
        "precision_top_k=[5]: relevant share of the first k, out of min(n_gt, k); precision/<k>");
  r.add("map", builtin::make_map, "map_top_k=[5]: mean average precision of the first k; map/<k>");
  r.add("fnmr", builtin::make_fnmr,
        "fmr_vals=[]: false non-match rate at these false match rates, over all pairs; fnmr@fmr/<fmr>");
  r.add("pcf", builtin::make_pcf,
        "pcf_variance=[]: share of principal components explaining more than v of the variance; pcf/<v>");
}

}  // namespace oml::metrics
