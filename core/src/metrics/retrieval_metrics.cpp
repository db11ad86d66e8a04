#include "oml/metrics/retrieval_metrics.h"

#include <algorithm>
#include <cmath>

#include "oml/common/error.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::metrics {

void QueryHits::add_query(const std::vector<uint8_t>& query_hits, int64_t query_n_gt) {
  hits.insert(hits.end(), query_hits.begin(), query_hits.end());
  offsets.push_back(static_cast<int64_t>(hits.size()));
  n_gt.push_back(query_n_gt);
}

QueryHits hits_of(const retrieval::RetrievalResults& results) {
  QueryHits out;
  out.offsets = results.offsets;
  out.n_gt = results.n_gt;
  out.hits.resize(results.retrieved.size());
  for (int64_t q = 0; q < results.num_queries(); ++q) {
    for (int64_t i = 0; i < results.size(q); ++i)
      out.hits[results.begin(q) + i] = results.is_hit(q, i) ? 1 : 0;
  }
  return out;
}

namespace {

void check_k(int64_t k, const char* metric) {
  if (k <= 0) {
    throw SettingError(std::string("metric_args.") + metric + "_top_k",
                       "top k must be a positive integer, got " + std::to_string(k));
  }
}

// Applies `per_query(first hit pointer, k', n_gt)` to queries with R > 0; a query with R = 0
// scores 1 without ground truth and 0 with it (docs/metrics.md#metrics).
template <class Fn>
std::vector<double> per_query(const QueryHits& hits, int64_t k, Fn&& fn) {
  std::vector<double> out(static_cast<std::size_t>(hits.num_queries()));
  for (int64_t q = 0; q < hits.num_queries(); ++q) {
    const int64_t retrieved = hits.offsets[q + 1] - hits.offsets[q];
    if (retrieved == 0) {
      out[q] = hits.n_gt[q] == 0 ? 1.0 : 0.0;
      continue;
    }
    out[q] = fn(hits.hits.data() + hits.offsets[q], std::min(k, retrieved), hits.n_gt[q]);
  }
  return out;
}

}  // namespace

std::vector<double> cmc_at_k(const QueryHits& hits, int64_t k) {
  check_k(k, "cmc");
  return per_query(hits, k, [](const uint8_t* g, int64_t top, int64_t) {
    return std::any_of(g, g + top, [](uint8_t v) { return v != 0; }) ? 1.0 : 0.0;
  });
}

std::vector<double> precision_at_k(const QueryHits& hits, int64_t k) {
  check_k(k, "precision");
  return per_query(hits, k, [](const uint8_t* g, int64_t top, int64_t n_gt) {
    if (n_gt == 0) return 0.0;
    int64_t found = 0;
    for (int64_t i = 0; i < top; ++i) found += g[i];
    return static_cast<double>(found) / static_cast<double>(std::min(n_gt, top));
  });
}

std::vector<double> map_at_k(const QueryHits& hits, int64_t k) {
  check_k(k, "map");
  return per_query(hits, k, [](const uint8_t* g, int64_t top, int64_t) {
    int64_t found = 0;
    double sum = 0.0;
    for (int64_t i = 0; i < top; ++i) {
      if (!g[i]) continue;
      ++found;
      sum += static_cast<double>(found) / static_cast<double>(i + 1);
    }
    return found == 0 ? 0.0 : sum / static_cast<double>(found);
  });
}

std::vector<double> ndcg_at_k(const QueryHits& hits, int64_t k) {
  check_k(k, "ndcg");
  return per_query(hits, k, [k](const uint8_t* g, int64_t top, int64_t n_gt) {
    if (n_gt == 0) return 0.0;
    auto discount = [](int64_t i) { return 1.0 / std::log2(static_cast<double>(i + 2)); };
    double dcg = 0.0;
    for (int64_t i = 0; i < top; ++i) {
      if (g[i]) dcg += discount(i);
    }
    // The DCG of a perfect ranking: min(n_gt, k) relevant items first (not min(n_gt, k'): a
    // list cut short by the gallery does not lower the bar).
    double ideal = 0.0;
    for (int64_t i = 0; i < std::min(n_gt, k); ++i) ideal += discount(i);
    return dcg / ideal;
  });
}

}  // namespace oml::metrics
