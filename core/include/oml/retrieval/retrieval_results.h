#pragma once
// The k nearest gallery items of every query (docs/metrics.md#retrieval), stored ragged: query q owns the
// entries [offsets[q], offsets[q + 1]) of `retrieved` and `distances`. Lists are sorted by
// ascending distance (an engine's: Euclidean, or -q.g; then the configured kind's,
// retrieval/distance_space.h); a postprocessor may shorten them (thresholding) or reorder
// them (re-ranking), so their lengths differ between queries.

#include <cstdint>
#include <vector>

namespace oml::retrieval {

struct RetrievalResults {
  std::vector<int64_t> offsets{0};  ///< Q + 1 entries; offsets[0] == 0
  std::vector<int64_t> retrieved;   ///< gallery positions (0 .. G-1), closest first
  std::vector<float> distances;     ///< distances (smaller is closer; -q.g may be negative), ascending
                                    ///< within each query

  std::vector<int64_t> n_gt;            ///< per query: relevant gallery items (ignored ones excluded)
  std::vector<int64_t> query_labels;    ///< per query
  std::vector<int64_t> gallery_labels;  ///< per gallery position
  std::vector<int64_t> query_ids;       ///< per query: dataset index (row of the dataframe)
  std::vector<int64_t> gallery_ids;     ///< per gallery position: dataset index

  int64_t num_queries() const { return static_cast<int64_t>(offsets.size()) - 1; }
  int64_t num_gallery() const { return static_cast<int64_t>(gallery_ids.size()); }
  /// Number of items retrieved for query q (R in docs/metrics.md#metrics).
  int64_t size(int64_t q) const { return offsets[q + 1] - offsets[q]; }
  int64_t begin(int64_t q) const { return offsets[q]; }
  int64_t end(int64_t q) const { return offsets[q + 1]; }
  /// Whether the i-th retrieved item of query q has the query's label.
  bool is_hit(int64_t q, int64_t i) const {
    return gallery_labels[retrieved[offsets[q] + i]] == query_labels[q];
  }

  /// Throws InternalError when the arrays disagree in length or a list is not ascending.
  void check_consistent() const;
};

}  // namespace oml::retrieval
