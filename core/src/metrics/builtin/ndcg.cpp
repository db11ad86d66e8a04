// ndcg@k (docs/metrics.md): discounted cumulative gain of the first k', over that of a perfect
// ranking. Off by default (ndcg_top_k: []), as when it was the example plugin.
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::vector<int64_t> parse_ndcg(config::ArgsReader& args) { return read_top_k(args, "ndcg", {}); }

std::shared_ptr<Metric> build_ndcg(const std::vector<int64_t>& ks, const NoContext&) {
  return top_k_metric("ndcg", ks, ndcg_at_k);
}

}  // namespace oml::metrics::builtin
