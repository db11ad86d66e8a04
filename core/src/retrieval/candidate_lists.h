#pragma once
// Internal: turning an index's raw answers (per query: candidate gallery positions and keys —
// squared distances, or -q.g under Measure::negative_dot) into RetrievalResults with the exact
// backend's rules — ignored pairs removed, distances of the measure, ascending, ties by gallery
// position. Shared by the approximate backends.

#include <cstdint>
#include <vector>

#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval::detail {

/// Results with n_gt, labels and ids filled and no lists yet (offsets = {0}); append_list()
/// adds the lists in query order.
/// `prepared`: the gallery's label counts computed once (a gallery index).
RetrievalResults results_skeleton(const ItemSet& queries, const ItemSet& gallery, const IgnoredPairs& ignored,
                                  const PreparedGallery* prepared = nullptr);

/// Candidates to ask an index for, so that top_k remain after the ignored pairs are dropped:
/// top_k + the most items any query can have ignored in this gallery (itself and the largest
/// gallery sequence), at most the gallery; computed once per search (O(G)). It depends on the
/// gallery alone: with a count that followed the batch's queries, exact ties at the end of the
/// candidates would fall differently in a batch of other queries (a rank's share under DDP)
/// than among all queries.
int64_t candidates_needed(const IgnoredPairs& ignored, int64_t top_k, int64_t gallery_size);

/// Appends query q's list from `n` candidates: gallery positions (negative = no candidate, as
/// Faiss pads) with their keys (squared distances; -q.g under negative_dot). Drops ignored pairs
/// and duplicates, orders by (key, position), keeps at most top_k, stores distance_of_key()
/// (sqrt(max(d2, 0)), or -q.g as it is).
void append_list(RetrievalResults& out, const IgnoredPairs& ignored, int64_t q, const int64_t* positions,
                 const float* keys, int64_t n, int64_t top_k, Measure measure);

/// The same with keys in double precision (re-ranked candidates).
void append_list(RetrievalResults& out, const IgnoredPairs& ignored, int64_t q,
                 std::vector<std::pair<double, int64_t>>& candidates, int64_t top_k, Measure measure);

/// |approximate list of row `a` ∩ exact list of row `e`| / |exact list|; 1 for an empty exact
/// list. The recall measure_recall() and the backends' target_recall average.
double list_recall(const RetrievalResults& approximate, int64_t a, const RetrievalResults& exact, int64_t e);

}  // namespace oml::retrieval::detail
