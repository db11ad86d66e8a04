// map@k (docs/metrics.md): mean of precision at each hit within the first k', normalised by hits.
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::vector<int64_t> parse_map(config::ArgsReader& args) { return read_top_k(args, "map", {5}); }

std::shared_ptr<Metric> build_map(const std::vector<int64_t>& ks, const NoContext&) {
  return top_k_metric("map", ks, map_at_k);
}

}  // namespace oml::metrics::builtin
