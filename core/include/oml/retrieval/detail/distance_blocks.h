#pragma once
// Internal: the blocked distance engine shared by k-NN retrieval and the pair statistics of
// fnmr@fmr. Not part of the public API.
//
// For a block of queries [q0, q1) and gallery items [g0, g1) it computes, with one matrix
// multiply, b[i][j] = -2 q.g; consumers add ||g||^2 (s = b + ||g||^2 orders the gallery like
// the squared distance ||q||^2 + s) and read the block while it is hot in cache.
//
// Under Measure::negative_dot the block holds -q.g and the gallery "norms" are 0, so the same
// consumers order by -q.g; the query "norms" are one constant R >= |q.g| (PreparedPair::
// value_offset), so that a pair's value ||q||^2 + b + ||g||^2 becomes R - q.g, never negative,
// for the pair statistics of fnmr@fmr. Nothing else in the consumers depends on the measure:
// they turn values and exact keys into distances through PreparedPair.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "oml/retrieval/knn.h"

namespace oml::retrieval::detail {

/// The exact key every backend's final order follows under `measure`, in double precision over
/// `dim` floats: ||a - b||^2 (euclidean) or -a.b (negative_dot).
double exact_key(Measure measure, const float* a, const float* b, int64_t dim);

/// The distance reported for an exact key: sqrt(max(key, 0)) (euclidean) or the key (-a.b).
double distance_of_key(Measure measure, double key);

/// The multiplier of q.g in a block entry under `measure`: -2 (||g||^2 - 2 q.g) or -1 (-q.g);
/// exact in float.
constexpr float block_alpha(Measure measure) { return measure == Measure::negative_dot ? -1.0f : -2.0f; }

/// Upper bound of |s_computed - s_exact| for a query of norm `query_norm` against gallery items of
/// norm at most `gallery_max_norm`, where s = ||g||^2 - 2 q.g (negative_dot: -q.g) in `dim`
/// dimensions: the standard floating-point dot-product bound (D + 4) u (sum of the magnitudes)
/// with u = 2^-24 and 1 % to spare for the norms' own rounding, which holds for any summation
/// order the BLAS picks. Both the exact engine and the IVF list scan select with it.
double selection_error_bound(Measure measure, int64_t dim, double query_norm, double gallery_max_norm);

/// The gallery's part of the engine's inputs, computed once for every search of a gallery index
/// (the exact backend's GalleryIndex): what each retrieve_knn() would otherwise compute again
/// over the whole gallery (norms, id positions, label counts).
struct PreparedGallery {
  /// `with_norms` false: ids and labels only (the Faiss indexes compute their own distances).
  explicit PreparedGallery(const ItemSet& gallery, bool with_norms = true);

  /// Follows GalleryIndex::add: `gallery` now holds new rows at [first, size) — O(new rows).
  void appended(const ItemSet& gallery, int64_t first);
  /// Follows GalleryIndex::remove: `gallery` lacks the rows at `removed` (ascending positions
  /// of the gallery before) — O(rows after the first removed one), no new hashing of the rest.
  void removed(const ItemSet& gallery, const std::vector<int64_t>& removed);

  at::Tensor gallery;         ///< [G, D] float32 contiguous
  std::vector<double> norm2;  ///< ||g||^2 in double (empty without norms)
  std::unordered_map<int64_t, int64_t> position_of_id;
  std::unordered_map<int64_t, int64_t> label_count;
  bool with_norms = true;

 private:
  std::vector<int64_t> ids_, labels_;  // as of the last update: what removed() takes away
};

/// The inputs of the engine, prepared once per retrieval.
struct PreparedPair {
  PreparedPair(const ItemSet& queries, const ItemSet& gallery, Measure measure = Measure::euclidean);
  /// The same over a gallery prepared once: only the queries' part is computed.
  PreparedPair(const ItemSet& queries, const PreparedGallery& gallery, Measure measure = Measure::euclidean);

  at::Tensor queries;                ///< [Q, D] float32 contiguous (raw vectors)
  at::Tensor gallery;                ///< [G, D] float32 contiguous (raw vectors)
  std::vector<float> gallery_norm2;  ///< ||g||^2 rounded to float (negative_dot: 0)
  std::vector<float> query_norm2;    ///< ||q||^2 rounded to float (negative_dot: value_offset)
  std::vector<double> query_norm;    ///< ||q||
  double gallery_max_norm = 0.0;     ///< max ||g||
  int64_t dim = 0;
  Measure measure = Measure::euclidean;
  /// negative_dot: R = max ||q|| x max ||g|| (rounded up to float, 1 % to spare), so that
  /// R - q.g >= 0 for every pair; 0 under euclidean.
  double value_offset = 0.0;
  /// The gallery is memory-mapped (io/mapped_file.h): exact_key reads its rows with
  /// io::gather_rows, so scattered candidates do not make the file resident.
  bool gallery_mapped = false;

  int64_t num_queries() const { return queries.size(0); }
  int64_t num_gallery() const { return gallery.size(0); }

  /// The multiplier of q.g in a block entry (detail::block_alpha).
  float block_alpha() const { return detail::block_alpha(measure); }

  /// detail::selection_error_bound for query q against this gallery.
  double selection_error_bound(int64_t q) const {
    return detail::selection_error_bound(measure, dim, query_norm[q], gallery_max_norm);
  }

  /// exact_key() of (q, g) over the raw float vectors: ||q - g||^2, or -q.g.
  double exact_key(int64_t q, int64_t g) const;

  /// A pair's value as the pair statistics see it (query_norm2 + block + gallery_norm2) as a
  /// distance: sqrt(v) (euclidean), or v - value_offset, that is -q.g (negative_dot).
  double distance_of_value(double value) const;
  /// No pair's value exceeds this: (max ||q|| + max ||g||)^2, or 2 value_offset.
  double max_value() const;

 private:
  PreparedPair(const ItemSet& queries, at::Tensor gallery_rows, const std::vector<double>& gallery_norm2,
               Measure measure);
};

/// Receives the blocks in order: for each query chunk, every gallery tile, then chunk_done.
class BlockConsumer {
 public:
  virtual ~BlockConsumer() = default;
  virtual void chunk_begin(int64_t q0, int64_t q1) {}
  /// `block` holds (q1 - q0) rows of (g1 - g0) values -2 q.g (negative_dot: -q.g), row-major.
  virtual void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) = 0;
  virtual void chunk_done(int64_t q0, int64_t q1) {}
};

/// Runs every consumer over all (query, gallery) blocks of the given shape.
void for_each_block(const PreparedPair& pair, const BlockShape& shape,
                    const std::vector<BlockConsumer*>& consumers);

/// retrieve_knn() on prepared inputs, with more consumers riding on the same blocks (the pair
/// statistics of fnmr@fmr use this to share the first pass with the retrieval).
RetrievalResults retrieve_knn_fused(const ItemSet& queries, const ItemSet& gallery, const PreparedPair& pair,
                                    const IgnoredPairs& ignored, const KnnOptions& options,
                                    const std::vector<BlockConsumer*>& also,
                                    const PreparedGallery* prepared = nullptr);

}  // namespace oml::retrieval::detail
