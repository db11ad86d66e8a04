#pragma once
// Internal: the blocked distance engine shared by k-NN retrieval and the pair statistics of
// fnmr@fmr. Not part of the public API.
//
// For a block of queries [q0, q1) and gallery items [g0, g1) it computes, with one matrix
// multiply, b[i][j] = -2 q.g; consumers add ||g||^2 (s = b + ||g||^2 orders the gallery like
// the squared distance ||q||^2 + s) and read the block while it is hot in cache.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "oml/retrieval/knn.h"

namespace oml::retrieval::detail {

/// ||a - b||^2 in double precision over `dim` floats: the distance every backend's final order
/// follows.
double exact_squared_distance(const float* a, const float* b, int64_t dim);

/// The gallery's part of the engine's inputs, computed once for every search of a gallery index
/// (the exact backend's GalleryIndex): what each retrieve_knn() would otherwise compute again
/// over the whole gallery (norms, id positions, label counts).
struct PreparedGallery {
  /// `with_norms` false: ids and labels only (the Faiss indexes compute their own distances).
  explicit PreparedGallery(const ItemSet& gallery, bool with_norms = true);
  at::Tensor gallery;         ///< [G, D] float32 contiguous
  std::vector<double> norm2;  ///< ||g||^2 in double (empty without norms)
  std::unordered_map<int64_t, int64_t> position_of_id;
  std::unordered_map<int64_t, int64_t> label_count;
};

/// The inputs of the engine, prepared once per retrieval.
struct PreparedPair {
  PreparedPair(const ItemSet& queries, const ItemSet& gallery);
  /// The same over a gallery prepared once: only the queries' part is computed.
  PreparedPair(const ItemSet& queries, const PreparedGallery& gallery);

  at::Tensor queries;                ///< [Q, D] float32 contiguous (raw vectors)
  at::Tensor gallery;                ///< [G, D] float32 contiguous (raw vectors)
  std::vector<float> gallery_norm2;  ///< ||g||^2 rounded to float
  std::vector<float> query_norm2;    ///< ||q||^2 rounded to float
  std::vector<double> query_norm;    ///< ||q||
  double gallery_max_norm = 0.0;     ///< max ||g||
  int64_t dim = 0;
  /// The gallery is memory-mapped (io/mapped_file.h): exact_squared_distance reads its rows with
  /// io::gather_rows, so scattered candidates do not make the file resident.
  bool gallery_mapped = false;

  int64_t num_queries() const { return queries.size(0); }
  int64_t num_gallery() const { return gallery.size(0); }

  /// Upper bound of |s_computed - s_exact| for every gallery item of query q, where
  /// s = ||g||^2 - 2 q.g: the standard floating-point dot-product bound (D + 4) u (sum of the
  /// magnitudes) with u = 2^-24, which holds for any summation order the BLAS picks.
  double selection_error_bound(int64_t q) const;

  /// ||q - g||^2 in double precision over the raw float vectors.
  double exact_squared_distance(int64_t q, int64_t g) const;

 private:
  PreparedPair(const ItemSet& queries, at::Tensor gallery_rows, const std::vector<double>& gallery_norm2);
};

/// Receives the blocks in order: for each query chunk, every gallery tile, then chunk_done.
class BlockConsumer {
 public:
  virtual ~BlockConsumer() = default;
  virtual void chunk_begin(int64_t q0, int64_t q1) {}
  /// `block` holds (q1 - q0) rows of (g1 - g0) values -2 q.g, row-major.
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
