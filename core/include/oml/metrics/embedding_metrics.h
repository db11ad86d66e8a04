#pragma once
// Validation metrics on embeddings (docs/metrics.md): retrieval in bounded memory, an optional
// postprocessor, then cmc / precision / map per query, fnmr@fmr over all pairs and pcf, as a
// flat map "OVERALL/cmc/1", "<category>/precision/5", "OVERALL/fnmr@fmr/0.01", ...
//
//   metrics::EmbeddingSet set{embeddings, labels, is_query, is_gallery};
//   metrics::EmbeddingMetricsOptions options;          // options.args = config.metric_args
//   auto result = metrics::compute_embedding_metrics(set, options);
//   double cmc1 = result.metrics.at("OVERALL/cmc/1");
//
// Under DDP the ranks' rows are merged (and de-duplicated) first; this runs once on the
// merged rows, so W ranks give the same numbers as one process.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "oml/common/progress_callback.h"
#include "oml/config/run_config.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval {
class Postprocessor;
}  // namespace oml::retrieval

namespace oml::metrics {

/// The validation rows in dataset order.
struct EmbeddingSet {
  at::Tensor embeddings;                 ///< [N, D] float32
  std::vector<int64_t> labels;           ///< N
  std::vector<uint8_t> is_query;         ///< N, 0/1
  std::vector<uint8_t> is_gallery;       ///< N, 0/1
  std::vector<std::string> categories;   ///< N or empty (no per-category metrics)
  std::vector<std::string> sequences;    ///< N or empty; "" = no sequence for that row
  std::vector<int64_t> dataset_indices;  ///< N or empty (= 0 .. N-1): names rows in messages
};

struct EmbeddingMetricsOptions {
  config::MetricArgs args;                                  ///< which metrics (metric_args:)
  double memory_budget_mb = 128;                            ///< one distance block, see KnnOptions
  const retrieval::Postprocessor* postprocessor = nullptr;  ///< applied before the metrics
  ProgressCallback on_progress;                             ///< k-NN progress (queries done, total)
};

struct EmbeddingMetricsResult {
  /// Flat keys -> values: OVERALL/<metric>/<k or value> and <category>/<metric>/<k or value>.
  std::map<std::string, double> metrics;
  /// Per query (in query order): "cmc/1", "precision/5", "map/5" -> one value per query.
  std::map<std::string, std::vector<double>> per_query;
  std::vector<int64_t> query_dataset_indices;  ///< dataset index of each query
  int64_t queries_without_ground_truth = 0;
  retrieval::RetrievalResults retrieval;  ///< after the postprocessor
};

/// Throws DataError for inconsistent rows (sizes, no query or gallery, a non-finite value) and
/// ConfigError for bad metric_args (k < 1, fmr or pcf values outside [0, 1]).
EmbeddingMetricsResult compute_embedding_metrics(const EmbeddingSet& set,
                                                 const EmbeddingMetricsOptions& options);

/// The shortest decimal text that reads back as `value` ("0.01", "0.5", "1"), for keys.
std::string format_key_number(double value);

}  // namespace oml::metrics
