#pragma once
// Internal (not part of the public API): the probed lists of an IVF-Flat index scanned with matrix multiplies
// (docs/metrics.md#retrieval-backends-retrieval_backend, `scan: blas`).
//
// An IVF index answers a query from the gallery items of its nprobe nearest lists. Faiss's
// IVF-Flat compares a query with the items of its lists one vector at a time (≈ 30 ns per
// 128-dimensional vector in Debian's baseline-x86-64 build). This engine turns the loop around:
// per list, the queries of a chunk that probe it are gathered into one block and multiplied by the
// list's vectors (one GEMM, as the exact engine does for the whole gallery), which costs ≈ 2 ns
// per candidate on the same machine.
//
// The candidates are the same as Faiss's: every item of every probed list. Each query keeps the
// items whose fp32 value ||g||^2 - 2 q.g lies within the floating-point error bound of its k-th
// smallest (as the exact engine does, knn.cpp), skipping ignored pairs, and ranks those by exact
// double-precision distance (ties by gallery position). So a query's list is the exact top k of
// its probed lists' items: it depends neither on the BLAS kernel nor on which other queries were
// scanned with it (the split over ranks relies on this). No
// Faiss type appears here: the index is seen through InvertedList views, so the engine is tested
// and builds without Faiss.

#include <cstdint>
#include <vector>

#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval::detail {

/// One inverted list: `size` vectors of the index's dimension, row-major, and their gallery
/// positions. The memory belongs to the index and must outlive the scanner.
struct InvertedList {
  int64_t size = 0;
  const float* vectors = nullptr;
  const int64_t* positions = nullptr;
};

/// Block shape of the per-list multiplies: at most row_tile queries x column_tile list items
/// (4 MiB of float at the defaults), so one huge list never needs a huge block.
struct ListScanShape {
  int64_t row_tile = 1024;
  int64_t column_tile = 1024;
};

class InvertedListScanner {
 public:
  /// Computes ||g||^2 of every list item once (the lists are not copied). Under
  /// Measure::negative_dot (an inner-product index) the lists are ranked by -q.g: blocks of -q.g,
  /// no norms, exact keys -q.g in double.
  InvertedListScanner(std::vector<InvertedList> lists, int64_t dim, Measure measure = Measure::euclidean,
                      ListScanShape shape = {});

  /// Appends to `out`, in query order, the lists of queries q0 .. q0 + n - 1: `queries` holds
  /// their n rows (float32, row-major, the index's dimension), `probes` n x nprobe list numbers
  /// (negative = no list, as Faiss pads). `ignored` is indexed by the global query number
  /// q0 + i. Each list holds at most top_k items (fewer when the probed lists offer fewer).
  void scan(const float* queries, int64_t n, int64_t q0, const int64_t* probes, int64_t nprobe,
            const IgnoredPairs& ignored, int64_t top_k, RetrievalResults& out) const;

  int64_t num_lists() const { return static_cast<int64_t>(lists_.size()); }

  /// `wanted` limited so that one scan()'s selection state (per intra-op thread and query, up to
  /// max(64, 4 top_k) candidates of 24 bytes) stays within 256 MB; at least 256 rows.
  static int64_t chunk_rows(int64_t wanted, int64_t top_k);

 private:
  struct Candidate;
  class ChunkHeaps;

  // Scans list l for the `count` queries (rows of the chunk) that probe it, into `heaps`.
  void scan_list(int64_t l, const float* queries, int64_t q0, const int64_t* list_rows, int64_t count,
                 const IgnoredPairs& ignored, ChunkHeaps& heaps, std::vector<float>& gathered,
                 std::vector<float>& block) const;

  std::vector<InvertedList> lists_;
  std::vector<std::vector<float>> norms_;  // per list, ||g||^2 of each item (double, rounded to fp32);
                                           // 0 under negative_dot
  double max_norm_ = 0.0;                  // the largest ||g||, for the selection's error bound
  int64_t dim_;
  Measure measure_;
  ListScanShape shape_;
};

}  // namespace oml::retrieval::detail
