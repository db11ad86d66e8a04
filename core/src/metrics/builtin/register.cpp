// The built-in metrics. Adding one: a file in this folder with its parse and build, their
// declarations in builtin_metrics.h, one line below, one row in docs/metrics.md (and
// docs/components.md).
#include "oml/metrics/register.h"

#include "builtin_metrics.h"
#include "oml/metrics/metric.h"
#include "oml/registry/registries.h"

namespace oml::metrics {

void register_builtin_metrics(Registries& registries) {
  auto& r = registries.metrics;
  r.add("cmc", builtin::parse_cmc, builtin::build_cmc,
        "cmc_top_k=[1, 5]: 1 when a relevant item is among the first k; cmc/<k>");
  r.add("precision", builtin::parse_precision, builtin::build_precision,
        "precision_top_k=[5]: relevant share of the first k, out of min(n_gt, k); precision/<k>");
  r.add("map", builtin::parse_map, builtin::build_map,
        "map_top_k=[5]: mean average precision of the first k; map/<k>");
  r.add("fnmr", builtin::parse_fnmr, builtin::build_fnmr,
        "fmr_vals=[]: false non-match rate at these false match rates, over all pairs; fnmr@fmr/<fmr>");
  r.add("pcf", builtin::parse_pcf, builtin::build_pcf,
        "pcf_variance=[]: share of principal components explaining more than v of the variance; pcf/<v>");
}

}  // namespace oml::metrics
