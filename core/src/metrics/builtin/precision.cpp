// precision@k (docs/metrics.md): relevant items among the first k' over min(n_gt, k').
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::vector<int64_t> parse_precision(config::ArgsReader& args) { return read_top_k(args, "precision", {5}); }

std::shared_ptr<Metric> build_precision(const std::vector<int64_t>& ks, const NoContext&) {
  return top_k_metric("precision", ks, precision_at_k);
}

}  // namespace oml::metrics::builtin
