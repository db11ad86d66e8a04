#include "oml/metrics/accuracy_calculator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace oml::metrics {

namespace {

constexpr double kNoGroundTruth = std::numeric_limits<double>::quiet_NaN();

// One value per query from the query's relevance flags (its first `size` retrieved items) and
// n_gt; NaN for a query without ground truth.
template <class PerQuery>
std::vector<double> per_query(const QueryHits& hits, PerQuery value_of) {
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(hits.num_queries()));
  for (int64_t q = 0; q < hits.num_queries(); ++q) {
    const int64_t n_gt = hits.n_gt[q];
    const uint8_t* relevant = hits.hits.data() + hits.offsets[q];
    const int64_t size = hits.offsets[q + 1] - hits.offsets[q];
    values.push_back(n_gt == 0 ? kNoGroundTruth : value_of(relevant, size, n_gt));
  }
  return values;
}

}  // namespace

std::vector<double> precision_at_1(const QueryHits& hits) {
  return per_query(hits, [](const uint8_t* relevant, int64_t size, int64_t) {
    return size > 0 && relevant[0] ? 1.0 : 0.0;
  });
}

std::vector<double> r_precision(const QueryHits& hits) {
  return per_query(hits, [](const uint8_t* relevant, int64_t size, int64_t n_gt) {
    const int64_t top = std::min(size, n_gt);
    return static_cast<double>(std::count(relevant, relevant + top, uint8_t{1})) / static_cast<double>(n_gt);
  });
}

std::vector<double> map_at_r(const QueryHits& hits) {
  return per_query(hits, [](const uint8_t* relevant, int64_t size, int64_t n_gt) {
    const int64_t top = std::min(size, n_gt);
    double sum = 0.0;
    int64_t found = 0;
    for (int64_t i = 0; i < top; ++i) {
      if (!relevant[i]) continue;
      ++found;
      sum += static_cast<double>(found) / static_cast<double>(i + 1);
    }
    return sum / static_cast<double>(n_gt);
  });
}

std::vector<double> reciprocal_rank(const QueryHits& hits, int64_t depth) {
  return per_query(hits, [depth](const uint8_t* relevant, int64_t size, int64_t) {
    const int64_t top = std::min(size, depth);
    const uint8_t* first = std::find(relevant, relevant + top, uint8_t{1});
    return first == relevant + top ? 0.0 : 1.0 / static_cast<double>(first - relevant + 1);
  });
}

int64_t max_ground_truth(const QueryHits& hits) {
  return hits.n_gt.empty() ? 0 : *std::max_element(hits.n_gt.begin(), hits.n_gt.end());
}

double mean_with_ground_truth(const std::vector<double>& values, const std::vector<int64_t>& queries) {
  double sum = 0.0;
  int64_t counted = 0;
  for (const int64_t q : queries) {
    if (std::isnan(values[q])) continue;
    sum += values[q];
    ++counted;
  }
  return counted == 0 ? kNoGroundTruth : sum / static_cast<double>(counted);
}

}  // namespace oml::metrics
