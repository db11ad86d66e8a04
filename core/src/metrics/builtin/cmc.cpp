// cmc@k (docs/metrics.md): 1 when a relevant item is among the first k retrieved, else 0.
#include "builtin_metrics.h"

namespace oml::metrics::builtin {

std::vector<int64_t> parse_cmc(config::ArgsReader& args) { return read_top_k(args, "cmc", {1, 5}); }

std::shared_ptr<Metric> build_cmc(const std::vector<int64_t>& ks, const NoContext&) {
  return top_k_metric("cmc", ks, cmc_at_k);
}

}  // namespace oml::metrics::builtin
