#pragma once
// pytorch-metric-learning's AccuracyCalculator k-NN metrics (PML 2.8.1,
// pytorch_metric_learning/utils/accuracy_calculator.py), per query, from the shared top-k lists
// (docs/metrics.md#pytorch-metric-learnings-accuracycalculator).
//
// With R = n_gt (the query's relevant gallery items: the query itself and items of its sequence
// excluded — PML's "label count minus one" when the reference includes the query) and g_i = 1
// when the i-th retrieved item is relevant:
//   precision_at_1              g_1
//   r_precision                 (sum_{i<=R} g_i) / R
//   mean_average_precision_at_r (1/R) sum_{i<=R} g_i * (sum_{j<=i} g_j) / i
//   mrr                         1 / (the first i <= depth with g_i = 1), 0 when there is none
// A list shorter than R counts its missing items as irrelevant. A query with R = 0 is what PML
// calls a "lone" query: it has no value (NaN), and PML's means leave it out
// (mean_with_ground_truth).

#include <cstdint>
#include <vector>

#include "oml/metrics/retrieval_metrics.h"

namespace oml::metrics {

std::vector<double> precision_at_1(const QueryHits& hits);
std::vector<double> r_precision(const QueryHits& hits);
std::vector<double> map_at_r(const QueryHits& hits);
/// Reciprocal rank of the first relevant item among the first `depth` retrieved. PML searches
/// k = max R neighbours (its k = "max_bin_count"): pass max_ground_truth(hits).
std::vector<double> reciprocal_rank(const QueryHits& hits, int64_t depth);

/// The largest n_gt of any query (0 without queries): PML's "max_bin_count" less the query itself.
int64_t max_ground_truth(const QueryHits& hits);

/// The mean of the values of `queries` that are not NaN; NaN when every one is (PML's
/// nan_accuracy when no query has ground truth).
double mean_with_ground_truth(const std::vector<double>& values, const std::vector<int64_t>& queries);

}  // namespace oml::metrics
