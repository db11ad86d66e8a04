#pragma once
// Exact k-nearest-neighbour retrieval in bounded memory (docs/metrics.md#bounded-memory-and-exactness).
//
//   retrieval::ItemSet queries{emb_q, labels_q, ids_q}, gallery{emb_g, labels_g, ids_g};
//   auto results = retrieval::retrieve_knn(queries, gallery, {/*top_k=*/5});
//
// Distances are computed block by block as ||g||^2 - 2 q.g (one matrix multiply per block of
// `query_chunk x gallery_tile` pairs), so peak memory is O(block + Q x k), never O(Q x G).
// The float32 matrix multiply only *selects* candidates: every item that could belong to the
// true top k under a rigorous float error bound is kept, its distance is recomputed exactly
// (double precision over the raw vectors) and the final order is by (exact distance, gallery
// position). The result therefore equals a brute-force double-precision ranking.
//
// Under Measure::negative_dot (`retrieval_backend: {distance: dot}`) the same engine ranks by
// -q.g (blocks of -q.g, no norms) and reports -q.g as the distance: smaller is still closer.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "oml/common/progress_callback.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval {

namespace detail {
struct PreparedGallery;
}  // namespace detail

/// One side of the retrieval (queries or gallery). Rows of `embeddings` ([n, D], float32)
/// match the entries of the vectors.
struct ItemSet {
  at::Tensor embeddings;           ///< [n, D] float32 (made contiguous internally)
  std::vector<int64_t> labels;     ///< n
  std::vector<int64_t> ids;        ///< n dataset indices; a query never retrieves its own id
  std::vector<int64_t> sequences;  ///< n sequence ids (>= 0) or empty; -1 = no sequence.
                                   ///< Gallery items sharing a query's sequence are ignored.
};

/// What the engines order by, smaller first. Every `retrieval_backend.distance` but `dot` is a
/// Euclidean search on the vectors as to_engine_space() gives them (distance_space.h).
enum class Measure {
  euclidean,     ///< ||q - g||
  negative_dot,  ///< -q.g: an inner-product search, negated so that smaller is closer
};

/// How to retrieve. Example: `KnnOptions opts; opts.top_k = 10; opts.memory_budget_mb = 64;`
struct KnnOptions {
  int64_t top_k = 5;                     ///< items kept per query (fewer when the gallery is smaller)
  double memory_budget_mb = 128;         ///< size of one distance block; chooses the block shape
  int64_t query_chunk = 0;               ///< rows per block (0: from the budget)
  int64_t gallery_tile = 0;              ///< gallery columns per block (0: from the budget)
  ProgressCallback on_progress;          ///< called after each chunk of queries (done, total queries)
  Measure measure = Measure::euclidean;  ///< what the lists are ordered by and report
};

/// The block shape used for `num_gallery` items under `options` (exposed for tests/benchmarks).
struct BlockShape {
  int64_t query_chunk;
  int64_t gallery_tile;
};
BlockShape choose_block_shape(int64_t num_queries, int64_t num_gallery, const KnnOptions& options);

/// Which (query, gallery) pairs are ignored: the query itself (same dataset id) and gallery
/// items sharing the query's sequence. Answers in O(1) without listing pairs, so one huge
/// sequence costs no memory.
class IgnoredPairs {
 public:
  /// `prepared`: the gallery's id positions computed once (a gallery index); null: from `gallery`.
  IgnoredPairs(const ItemSet& queries, const ItemSet& gallery,
               const detail::PreparedGallery* prepared = nullptr);

  bool contains(int64_t q, int64_t g) const {
    return g == self_[q] || (query_sequence_[q] >= 0 && gallery_sequence_[g] == query_sequence_[q]);
  }
  /// Number of gallery items ignored for query q.
  int64_t count(int64_t q) const { return count_[q]; }
  /// Gallery position holding the query itself, or -1.
  int64_t self_position(int64_t q) const { return self_[q]; }
  /// Sequence id of query q (-1: none) and of every gallery item (empty: no sequences).
  int64_t query_sequence(int64_t q) const { return query_sequence_[q]; }
  const std::vector<int64_t>& gallery_sequences() const { return gallery_sequence_; }
  /// Per query, ignored gallery items that carry the query's label (for n_gt).
  int64_t count_with_label(int64_t q) const { return count_same_label_[q]; }

 private:
  std::vector<int64_t> self_;
  std::vector<int64_t> query_sequence_;
  std::vector<int64_t> gallery_sequence_;
  std::vector<int64_t> count_;
  std::vector<int64_t> count_same_label_;
};

/// Number of gallery items with the query's label, ignored pairs excluded (n_gt), computed
/// from label counts — no Q x G matrix (`prepared`: the gallery's label counts computed once).
std::vector<int64_t> count_ground_truth(const ItemSet& queries, const ItemSet& gallery,
                                        const IgnoredPairs& ignored,
                                        const detail::PreparedGallery* prepared = nullptr);

/// Top-k retrieval as described above. Throws DataError for inconsistent inputs (sizes,
/// dimensions, non-finite values), naming the offending row.
RetrievalResults retrieve_knn(const ItemSet& queries, const ItemSet& gallery, const KnnOptions& options);

/// Checks sizes, dimensions and finiteness; `what` names the set in messages ("gallery").
void validate_item_set(const ItemSet& items, const char* what);

}  // namespace oml::retrieval
