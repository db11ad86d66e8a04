#pragma once
// Internal to fnmr@fmr: the histogram method, which finds the negative distances at the quantile
// ranks exactly in a few passes of bounded memory — used when window mode is off or its windows
// missed a rank (window_scan.h). A level-0 histogram of the negatives locates each rank in a
// bin; a bin too full to collect is refined by a histogram pass over it, and so on; a last pass
// collects the values of the bins holding the ranks.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "oml/metrics/detail/pair_statistics.h"
#include "oml/metrics/fnmr.h"
#include "pair_scan.h"

namespace oml::metrics::detail {

// One histogram level: `bins` bins of width 1 / inv starting at lo. Values outside fall into
// the first or last bin, so every value has exactly one bin at every level and membership of
// a nested cell is decided by the same arithmetic in every pass.
struct Level {
  double lo = 0.0;
  double inv = 1.0;
  int64_t bins = 1;
  int64_t index = 0;

  int64_t bin_of(double value) const {
    const double x = (value - lo) * inv;
    if (!(x >= 0.0)) return 0;
    if (x >= static_cast<double>(bins)) return bins - 1;
    return std::min<int64_t>(static_cast<int64_t>(x), bins - 1);
  }
  // The next level splitting this level's chosen bin.
  Level child(int64_t child_bins) const {
    return Level{lo + static_cast<double>(index) / inv, inv * static_cast<double>(child_bins), child_bins, 0};
  }
};

class HistogramRefinement {
 public:
  /// Level 0 spans [0, (max ||q|| + max ||g||)^2] in options.bins bins.
  HistogramRefinement(PairScan& scan, const PairStatisticsOptions& options);

  /// Allocates the level-0 counts; call before add().
  void start();
  /// Counts one negative pair's squared distance into level 0 (pass 1 without windows).
  void add(int thread, double d2) { ++level0_counts_[thread][level0_.bin_of(d2)]; }
  /// Counts level 0 in a pass of its own (pass 1 ran the windows instead).
  void count_level0(const retrieval::BlockShape& shape);

  /// The values at every quantile's ranks among the `positions` (over all negatives counted
  /// in level 0), with as many refinement passes as needed and one collection pass.
  std::vector<RankValues> read(const retrieval::BlockShape& shape,
                               const std::vector<QuantilePosition>& positions);

 private:
  PairScan& scan_;
  PairStatisticsOptions options_;
  Level level0_;
  std::vector<std::vector<int64_t>> level0_counts_;  // per thread
};

}  // namespace oml::metrics::detail
