// Example third-party plugin: `recall`, recall at k, a retrieval metric that oml-cpp does not
// build in.
//
//   plugins: [/path/to/librecall_metric.so]
//   metric_args: {cmc_top_k: [1], recall_top_k: [5, 10]}
//   metric_for_checkpointing: OVERALL/recall/5
//
// With g_i = 1 when the i-th retrieved item has the query's label, R items retrieved and
// k' = min(k, R):  recall@k = (sum_{i <= k'} g_i) / n_gt, the share of the query's relevant
// gallery items found among the first k (oml-cpp's precision@k divides by min(n_gt, k') instead).
// Like oml-cpp's precision, a query without ground truth scores 0 when something was retrieved,
// and an empty list scores 1 without ground truth and 0 with it. Reported per query, so the table
// averages it over every query and per category, and worst-query grids can show it.
//
// Everything it uses comes from the installed oml-cpp headers: the metric contract
// (oml/metrics/metric.h), the relevance of the retrieved items (oml/metrics/retrieval_metrics.h),
// the args reader (oml/config/args_reader.h), argument errors that point at the key
// (oml/config/argument_error.h) and the plugin entry point (oml/registry/plugin.h).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/metrics/metric.h"
#include "oml/registry/plugin.h"

namespace example {

class RecallMetric final : public oml::metrics::Metric {
 public:
  explicit RecallMetric(std::vector<int64_t> ks) : ks_(std::move(ks)) {}

  std::vector<std::string> names() const override {
    std::vector<std::string> names;
    for (const int64_t k : ks_) names.push_back("recall/" + std::to_string(k));
    return names;
  }

  int64_t required_top_k() const override { return *std::max_element(ks_.begin(), ks_.end()); }

  oml::metrics::MetricValues compute(const oml::metrics::MetricInputs& inputs) const override {
    const oml::metrics::QueryHits& hits = inputs.hits;
    oml::metrics::MetricValues values;
    for (const int64_t k : ks_) {
      std::vector<double>& per_query = values.per_query["recall/" + std::to_string(k)];
      for (int64_t q = 0; q < hits.num_queries(); ++q) {
        const int64_t retrieved = hits.offsets[q + 1] - hits.offsets[q];
        per_query.push_back(
            recall(hits.hits.data() + hits.offsets[q], std::min(k, retrieved), hits.n_gt[q], retrieved));
      }
    }
    return values;
  }

 private:
  static double recall(const uint8_t* relevant, int64_t top, int64_t n_gt, int64_t retrieved) {
    if (retrieved == 0) return n_gt == 0 ? 1.0 : 0.0;
    if (n_gt == 0) return 0.0;
    const auto found = std::count(relevant, relevant + top, uint8_t{1});
    return static_cast<double>(found) / static_cast<double>(n_gt);
  }

  std::vector<int64_t> ks_;
};

// Parse: every metric reads its own keys of the shared `metric_args:` mapping through the reader.
std::vector<int64_t> parse_recall(oml::config::ArgsReader& args) {
  std::vector<int64_t> ks;  // default: off, so loading the plugin changes no other run
  args.optional("recall_top_k", ks);
  args.check([&] {  // value checks: collected, and skipped when the key itself read badly
    for (const int64_t k : ks) {
      // Points at metric_args.recall_top_k in the user's config (file:line:column).
      oml::config::check_argument(k >= 1, "metric 'recall'", "recall_top_k",
                                  "k values must be positive integers, got ", k);
    }
  });
  std::sort(ks.begin(), ks.end());  // a k listed twice is reported once: stems must be unique
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  return ks;
}

// Build: nothing asked of the metric -> nullptr.
std::shared_ptr<oml::metrics::Metric> build_recall(const std::vector<int64_t>& ks, const oml::NoContext&) {
  if (ks.empty()) return nullptr;
  return std::make_shared<RecallMetric>(ks);
}

void register_components(oml::Registries& registries) {
  registries.metrics.add(
      "recall", parse_recall, build_recall,
      "recall_top_k=[]: share of the relevant gallery items among the first k; recall/<k>");
}

}  // namespace example

OML_PLUGIN("recall_metric", "1.0.0", example::register_components)
