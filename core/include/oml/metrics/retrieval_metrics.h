#pragma once
// Per-query retrieval metrics exactly as docs/metrics.md#metrics defines them. Every function returns one
// value per query; averaging (overall or per category) is the caller's choice.
//
// With R = items retrieved for a query, k' = min(k, R) and g_i = 1 when the i-th item is
// relevant: R = 0 gives 1 when n_gt = 0 and 0 when n_gt > 0, for every metric.

#include <cstdint>
#include <vector>

namespace oml::retrieval {
struct RetrievalResults;
}  // namespace oml::retrieval

namespace oml::metrics {

/// Relevance of every retrieved item, ragged like RetrievalResults:
/// hits[offsets[q] + i] == 1 when the i-th item retrieved for query q is relevant.
struct QueryHits {
  std::vector<int64_t> offsets{0};
  std::vector<uint8_t> hits;
  std::vector<int64_t> n_gt;  ///< relevant gallery items per query (ignored ones excluded)

  int64_t num_queries() const { return static_cast<int64_t>(offsets.size()) - 1; }
  /// Appends one query (tests and hand-made cases).
  void add_query(const std::vector<uint8_t>& query_hits, int64_t query_n_gt);
};

/// g_i for every retrieved item (same label as the query).
QueryHits hits_of(const retrieval::RetrievalResults& results);

/// cmc@k = 1 if any g_i = 1 for i <= k, else 0.
std::vector<double> cmc_at_k(const QueryHits& hits, int64_t k);
/// precision@k = (sum_{i<=k'} g_i) / min(n_gt, k'); 0 when n_gt = 0 < R [differs: OML gives NaN].
std::vector<double> precision_at_k(const QueryHits& hits, int64_t k);
/// map@k = (1/h) sum_{i<=k'} g_i * (sum_{j<=i} g_j) / i with h = hits in the top k' (0 if h = 0).
std::vector<double> map_at_k(const QueryHits& hits, int64_t k);
/// ndcg@k = DCG@k / IDCG@k with DCG@k = sum_{i<=k'} g_i / log2(i + 1) and IDCG@k the DCG of
/// min(n_gt, k) relevant items first; 0 when n_gt = 0 < R (as precision).
std::vector<double> ndcg_at_k(const QueryHits& hits, int64_t k);

}  // namespace oml::metrics
