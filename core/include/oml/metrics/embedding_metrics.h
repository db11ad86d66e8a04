#pragma once
// Validation metrics on embeddings (docs/metrics.md): retrieval in bounded memory, an optional
// postprocessor, then every metric of the run's MetricTable from that one result, as a flat
// map "OVERALL/cmc/1", "<category>/precision/5", "OVERALL/fnmr@fmr/0.01", ...
//
//   metrics::EmbeddingSet set{embeddings, labels, is_query, is_gallery};
//   metrics::EmbeddingMetricsOptions options;
//   options.metrics = metrics::configure_metrics(config.metric_args);  // once per run
//   auto result = metrics::compute_embedding_metrics(set, options);
//   double cmc1 = result.metrics.at("OVERALL/cmc/1");
//
// The top-k come from options.backend (default `exact`); with an approximate backend and
// options.report_recall = N, its recall@k against exact search on N random queries is reported
// as "OVERALL/knn_recall/<k>" next to the metrics; without it, the recall the backend's
// target_recall reached while choosing its search parameters (RetrievalBackend::tuned_recall).
//
// Under DDP the ranks' rows are merged (and de-duplicated) first, so every rank holds all rows.
// With `options.group` the ranks then share the k-NN (oml/retrieval/sharded_knn.h): every rank
// calls this with the same rows and options and gets the same result, equal to one process's
// bit for bit (with fnmr@fmr only rank 0 gets it; see `group`). An approximate backend is split
// too: every rank builds its own index over the whole gallery and searches its share of the
// queries — one process's lists where the backend builds the same index on every rank
// (RetrievalBackend::deterministic_build).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oml/common/distance_kind.h"
#include "oml/common/progress_callback.h"
#include "oml/metrics/embedding_set.h"
#include "oml/metrics/metric_table.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::distributed {
class ProcessGroup;
}  // namespace oml::distributed
namespace oml::retrieval {
class Postprocessor;
class RetrievalBackend;
}  // namespace oml::retrieval

namespace oml::metrics {

struct EmbeddingMetricsOptions {
  MetricTable metrics;                                      ///< which metrics (configure_metrics)
  double memory_budget_mb = 128;                            ///< one distance block, see KnnOptions
  const retrieval::Postprocessor* postprocessor = nullptr;  ///< applied before the metrics
  /// What the retrieval measures (oml/retrieval/distance_space.h): the results' distances, the
  /// postprocessor's thresholds and the ranking are in its units. Not dot.
  DistanceKind distance = DistanceKind::euclidean;
  /// Who finds the top-k (retrieval/backend.h); null: `exact`. A backend other than `exact`
  /// with a metric over all pairs (fnmr@fmr) is a ConfigError.
  const retrieval::RetrievalBackend* backend = nullptr;
  /// With an approximate backend: the exact top-k of this many random queries, and their
  /// recall@k as OVERALL/knn_recall/<k> in `metrics` (0: not measured; the backend's
  /// tuned_recall() is reported there instead where it has one). Seeded by recall_seed.
  int64_t report_recall = 0;
  uint64_t recall_seed = 42;
  ProgressCallback on_progress;  ///< k-NN progress (queries done, total)
  /// The ranks that split the k-NN (docs/ddp.md#the-k-nn-split-over-the-ranks); null or a group of
  /// one: this process alone. With several ranks the call is collective and every rank returns the
  /// same result (with an approximate backend each rank holds its own index of the whole gallery)
  /// — except with metrics over all pairs (fnmr@fmr), which ride on one pass over every block:
  /// then rank 0 computes alone and the others return an empty result at once.
  distributed::ProcessGroup* group = nullptr;
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

/// Throws DataError for inconsistent rows (sizes, no query or gallery, a non-finite value).
/// The metric args were checked by configure_metrics.
EmbeddingMetricsResult compute_embedding_metrics(const EmbeddingSet& set,
                                                 const EmbeddingMetricsOptions& options);

}  // namespace oml::metrics
