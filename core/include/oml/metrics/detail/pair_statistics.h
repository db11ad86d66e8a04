#pragma once
// Internal: fnmr@fmr over every non-ignored (query, gallery) pair in bounded memory.
//
// The negative-pair distances are never all stored. A sample of query chunks x random gallery
// items (small GEMMs) places a window of squared distances around each quantile; pass 1
// (shared with the k-NN retrieval) counts the negatives below each window and collects those
// inside it (at most window_cap values; all negatives when they fit). When every rank the
// quantiles need lies inside its window — checked exactly from the counts — pass 1 is the only
// pass. Otherwise the histogram method takes over: a level-0 histogram pass, the ranks located
// in their bins, refined by further histogram passes while a bin is too full, and the values
// of those bins collected exactly in a last pass. Positive distances are kept in memory when
// they fit (sum of n_gt <= positive_cap), otherwise counted in one more pass once T is known.
//
// PairStatistics is a facade: the pair scan every pass shares, the window scan and the histogram
// method are separate types in core/src/metrics/ (pair_scan.h, window_scan.h,
// histogram_refinement.h).

#include <cstdint>
#include <memory>
#include <vector>

#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::metrics::detail {

struct PairStatisticsOptions {
  int64_t bins = 1 << 18;          ///< histogram bins per pass
  int64_t collect_cap = 1 << 23;   ///< most negative distances collected in the exact pass
  int64_t positive_cap = 1 << 25;  ///< most positive distances kept in memory
  /// Most negative distances pass 1 collects around the quantiles (0: no windows, histogram
  /// passes only). With all negatives under the cap, pass 1 alone is exact.
  int64_t window_cap = 1 << 25;
  /// Chunks of 16 queries x 16 random gallery items in the sample that places the windows.
  int64_t sample_chunks = 4096;
};

class PairStatistics {
 public:
  PairStatistics(const retrieval::detail::PreparedPair& pair, const retrieval::IgnoredPairs& ignored,
                 const std::vector<int64_t>& query_labels, const std::vector<int64_t>& gallery_labels,
                 const std::vector<int64_t>& n_gt, std::vector<double> fmr_vals,
                 PairStatisticsOptions options = {});
  ~PairStatistics();

  /// The consumer of pass 1; run it over every block (e.g. fused with the retrieval).
  retrieval::detail::BlockConsumer& first_pass();

  /// Runs the remaining passes with blocks of `shape` and returns fnmr per fmr value (NaN when
  /// there are no positive or no negative pairs).
  std::vector<double> finish(const retrieval::BlockShape& shape);

  /// The thresholds T per fmr value that finish() found (empty before it, or where it returned
  /// NaN): the fmr-quantiles of the negative-pair distances.
  const std::vector<double>& thresholds() const { return thresholds_; }

  int64_t num_positive() const { return num_positive_; }
  int64_t num_negative() const { return num_negative_; }
  /// Passes over all pairs made so far (pass 1 included) — for tests and logs.
  int passes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t num_positive_ = 0;
  int64_t num_negative_ = 0;
  std::vector<double> thresholds_;
};

}  // namespace oml::metrics::detail
