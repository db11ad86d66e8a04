// Example third-party plugin: `ndcg`, normalised discounted cumulative gain at k, a retrieval
// metric that oml-cpp does not build in.
//
//   plugins: [/path/to/libndcg_metric.so]
//   metric_args: {cmc_top_k: [1], ndcg_top_k: [5, 10]}
//   metric_for_checkpointing: OVERALL/ndcg/5
//
// With g_i = 1 when the i-th retrieved item has the query's label, R items retrieved and
// k' = min(k, R):  DCG@k = sum_{i <= k'} g_i / log2(i + 1), and ndcg@k = DCG@k / IDCG@k, where
// IDCG@k = sum_{i <= min(n_gt, k)} 1 / log2(i + 1) is the DCG of a perfect ranking. Like
// oml-cpp's precision, a query without ground truth scores 0 when something was retrieved, and
// an empty list scores 1 without ground truth and 0 with it. Reported per query, so the table
// averages it over every query and per category, and worst-query grids can show it.
//
// Everything it uses comes from the installed oml-cpp headers: the metric contract
// (oml/metrics/metric.h), the relevance of the retrieved items (oml/metrics/retrieval_metrics.h),
// the args reader (oml/config/args_reader.h), argument errors that point at the key
// (oml/config/argument_error.h) and the plugin entry point (oml/registry/plugin.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/metrics/metric.h"
#include "oml/registry/plugin.h"

namespace example {

class NdcgMetric final : public oml::metrics::Metric {
 public:
  explicit NdcgMetric(std::vector<int64_t> ks) : ks_(std::move(ks)) {}

  std::vector<std::string> names() const override {
    std::vector<std::string> names;
    for (const int64_t k : ks_) names.push_back("ndcg/" + std::to_string(k));
    return names;
  }

  int64_t required_top_k() const override { return *std::max_element(ks_.begin(), ks_.end()); }

  oml::metrics::MetricValues compute(const oml::metrics::MetricInputs& inputs) const override {
    const oml::metrics::QueryHits& hits = inputs.hits;
    oml::metrics::MetricValues values;
    for (const int64_t k : ks_) {
      std::vector<double>& per_query = values.per_query["ndcg/" + std::to_string(k)];
      for (int64_t q = 0; q < hits.num_queries(); ++q) {
        const int64_t retrieved = hits.offsets[q + 1] - hits.offsets[q];
        per_query.push_back(
            ndcg(hits.hits.data() + hits.offsets[q], std::min(k, retrieved), hits.n_gt[q], k, retrieved));
      }
    }
    return values;
  }

 private:
  static double ndcg(const uint8_t* relevant, int64_t top, int64_t n_gt, int64_t k, int64_t retrieved) {
    if (retrieved == 0) return n_gt == 0 ? 1.0 : 0.0;
    if (n_gt == 0) return 0.0;
    double dcg = 0.0;
    for (int64_t i = 0; i < top; ++i) {
      if (relevant[i]) dcg += 1.0 / std::log2(static_cast<double>(i + 2));
    }
    double ideal = 0.0;
    for (int64_t i = 0; i < std::min(n_gt, k); ++i) ideal += 1.0 / std::log2(static_cast<double>(i + 2));
    return dcg / ideal;
  }

  std::vector<int64_t> ks_;
};

// Parse: every metric reads its own keys of the shared `metric_args:` mapping through the reader.
std::vector<int64_t> parse_ndcg(oml::config::ArgsReader& args) {
  std::vector<int64_t> ks;  // default: off, so loading the plugin changes no other run
  args.optional("ndcg_top_k", ks);
  args.check([&] {  // value checks: collected, and skipped when the key itself read badly
    for (const int64_t k : ks) {
      // Points at metric_args.ndcg_top_k in the user's config (file:line:column).
      oml::config::check_argument(k >= 1, "metric 'ndcg'", "ndcg_top_k",
                                  "k values must be positive integers, got ", k);
    }
  });
  std::sort(ks.begin(), ks.end());  // a k listed twice is reported once: stems must be unique
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  return ks;
}

// Build: nothing asked of the metric -> nullptr.
std::shared_ptr<oml::metrics::Metric> build_ndcg(const std::vector<int64_t>& ks, const oml::NoContext&) {
  if (ks.empty()) return nullptr;
  return std::make_shared<NdcgMetric>(ks);
}

void register_components(oml::Registries& registries) {
  registries.metrics.add("ndcg", parse_ndcg, build_ndcg,
                         "ndcg_top_k=[]: normalised discounted cumulative gain of the first k; ndcg/<k>");
}

}  // namespace example

OML_PLUGIN("ndcg_metric", "1.0.0", example::register_components)
