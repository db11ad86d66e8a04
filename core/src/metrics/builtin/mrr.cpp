// mrr (docs/metrics.md, PML's AccuracyCalculator "mean_reciprocal_rank"): 1 / rank of the first
// relevant item within the first max R retrieved (PML's k = "max_bin_count"), 0 when none is.
#include "builtin_metrics.h"
#include "oml/metrics/accuracy_calculator.h"

namespace oml::metrics::builtin {

namespace {
std::vector<double> reciprocal_rank_to_max_ground_truth(const QueryHits& hits) {
  return reciprocal_rank(hits, max_ground_truth(hits));
}
}  // namespace

bool parse_mrr(config::ArgsReader& args) { return read_switch(args, "mrr", "mean_reciprocal_rank"); }

std::shared_ptr<Metric> build_mrr(const bool& on, const NoContext&) {
  return accuracy_calculator_metric("mrr", on, reciprocal_rank_to_max_ground_truth);
}

}  // namespace oml::metrics::builtin
