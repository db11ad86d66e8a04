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
  r.add("ndcg", builtin::parse_ndcg, builtin::build_ndcg,
        "ndcg_top_k=[]: normalised discounted cumulative gain of the first k; ndcg/<k>");
  // pytorch-metric-learning's AccuracyCalculator metrics, each switched on by its name (PML's
  // spelling, where it differs, is the key's other name).
  r.add("precision_at_1", builtin::parse_precision_at_1, builtin::build_precision_at_1,
        "precision_at_1=false: PML's precision_at_1, the nearest item relevant; precision_at_1");
  r.add(
      "r_precision", builtin::parse_r_precision, builtin::build_r_precision,
      "r_precision=false: PML's r_precision, relevant share of the first R (R: relevant items); r_precision");
  r.add("mean_average_precision_at_r", builtin::parse_map_at_r, builtin::build_map_at_r,
        "mean_average_precision_at_r=false: PML's MAP@R, average precision of the first R over R; "
        "mean_average_precision_at_r");
  r.add("mrr", builtin::parse_mrr, builtin::build_mrr,
        "mrr (PML: mean_reciprocal_rank)=false: 1 / rank of the first relevant item within max R; mrr");
  r.add("nmi", builtin::parse_nmi, builtin::build_nmi,
        "nmi (PML: NMI)=false: normalized mutual information of labels and Faiss k-means clusters; nmi");
  r.add("ami", builtin::parse_ami, builtin::build_ami,
        "ami (PML: AMI)=false: adjusted mutual information of labels and Faiss k-means clusters; ami");
}

}  // namespace oml::metrics
