#pragma once
// The k-NN with the search split over the ranks of a process group
// (docs/ddp.md#the-k-nn-split-over-the-ranks).
//
//   // every rank holds the same queries and gallery (validation merges the embeddings first)
//   auto results = retrieval::retrieve_knn_sharded(*group, queries, gallery, options);  // collective
//   // any backend: each rank searches its share of the queries with its own index
//   auto approx = retrieval::retrieve_sharded_by_queries(*group, queries, gallery, options,
//       [&](const ItemSet& q, const ItemSet& g, const KnnOptions& o) { return backend.search(q, g, o); });
//
// Each rank runs retrieve_knn() (knn.h) on its contiguous share, only the top-k lists travel
// (Q x k entries, never embeddings), and every rank returns exactly what
// retrieve_knn(queries, gallery, options) returns in one process: the same neighbours in the same
// order with bit-identical distances. So the metrics computed from it are the single-process ones.
//
// Two ways to share the work, same result:
//  - ShardAxis::queries (default): rank r ranks its 1/W of the queries against the whole gallery;
//    a query's list is final where it is computed, the lists are only concatenated.
//  - ShardAxis::gallery: rank r ranks every query against its 1/W of the gallery; per query the W
//    partial lists are merged by (exact key, gallery position) — the key retrieve_knn sorts by:
//    the squared distance, or -q.g under Measure::negative_dot — so ties fall exactly as in one
//    process.
// Both halve the work per rank at 2 ranks (docs/benchmarks.md#exact-k-nn-split-over-the-ranks);
// the default, queries, gathers W times less and merges nothing.

#include <cstdint>
#include <functional>
#include <vector>

#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::distributed {
class ProcessGroup;
}  // namespace oml::distributed

namespace oml::retrieval {

enum class ShardAxis { queries, gallery };
/// The axis validation splits along (same work as by gallery, nothing to merge).
inline constexpr ShardAxis kDefaultShardAxis = ShardAxis::queries;

/// "queries" | "gallery".
const char* axis_name(ShardAxis axis);

/// Rows [begin, end) of a set.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

/// Rank `rank`'s contiguous share of `n` rows among `world` ranks, in rank order; the first
/// n mod world ranks get one row more. Shares may be empty (n < world).
RowRange shard_of(int64_t n, int rank, int world);

/// Rows `rows` of `items`: the embeddings as a view (no copy), the vectors copied.
ItemSet slice_items(const ItemSet& items, RowRange rows);

/// The top-k lists of every query over one share of the gallery, with exact keys (double) and
/// positions in the whole gallery: what ShardAxis::gallery gathers from each rank.
struct PartialLists {
  std::vector<int64_t> sizes;      ///< per query: entries in this share's list
  std::vector<int64_t> positions;  ///< whole-gallery positions, query by query
  std::vector<double> keys;        ///< ||q - g||^2 (or -q.g) as retrieve_knn computes it
};

/// Merges the shares' lists query by query into the first min(top_k, total entries) items by
/// (key, position); distances are detail::distance_of_key(measure, key) rounded to float, as in
/// retrieve_knn (the square root under euclidean). Fills offsets, retrieved and distances of
/// `out` (InternalError on lists of different query counts or unsorted lists).
void merge_partial_lists(const std::vector<PartialLists>& shares, int64_t top_k, RetrievalResults& out,
                         Measure measure = Measure::euclidean);

/// How a rank finds the lists of its share of the queries against the whole gallery: retrieve_knn
/// for the exact k-NN, RetrievalBackend::search (backend.h) for the others. It must answer each
/// query as it would in one call over all queries (a query's list may not depend on the other
/// queries searched with it), or the split differs from one process.
using SearchShare = std::function<RetrievalResults(const ItemSet& queries, const ItemSet& gallery,
                                                   const KnnOptions& options)>;

/// Collective, ShardAxis::queries with any search: rank r passes its contiguous share
/// (shard_of) of `queries` and the whole `gallery` to `search`, and the lists are gathered in rank
/// order onto every rank, so every rank returns the same result — `search(queries, gallery,
/// options)` in one process when `search` answers each query independently. Inputs are checked
/// on every rank first, as by retrieve_knn_sharded; `search` is called on every rank, also for an
/// empty share (fewer queries than ranks), so an error it raises from its options or the gallery
/// is raised by every rank alike. With a group of one this is search(queries, gallery, options).
RetrievalResults retrieve_sharded_by_queries(distributed::ProcessGroup& group, const ItemSet& queries,
                                             const ItemSet& gallery, const KnnOptions& options,
                                             const SearchShare& search);

/// Collective: every rank of `group` calls it with the same queries, gallery and options (in
/// particular top_k) and receives the same result, equal to retrieve_knn(queries, gallery, options).
/// Inputs are checked on every rank before any work, so bad data fail with the same DataError
/// (naming the row in the whole set) everywhere. `options.on_progress` sees this rank's share
/// scaled to the whole query count, and reaches the total once the lists are gathered. With a
/// group of one this is retrieve_knn().
RetrievalResults retrieve_knn_sharded(distributed::ProcessGroup& group, const ItemSet& queries,
                                      const ItemSet& gallery, const KnnOptions& options,
                                      ShardAxis axis = kDefaultShardAxis);

}  // namespace oml::retrieval
