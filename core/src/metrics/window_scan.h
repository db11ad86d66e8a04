#pragma once
// Internal to fnmr@fmr: pass 1 in window mode. For each quantile a window of squared distances
// is chosen (everything when all negatives fit in window_cap, otherwise placed from a sample);
// the scan counts the negatives below each window and collects those inside it. When every rank
// a quantile needs lies inside its window — checked exactly from the counts — the values are
// read from the windows and pass 1 was the only pass; otherwise read() says so and
// HistogramRefinement takes over.

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "oml/metrics/detail/pair_statistics.h"
#include "oml/metrics/fnmr.h"
#include "pair_scan.h"

namespace oml::metrics::detail {

/// A range of squared distances [lo, hi] whose negatives pass 1 collects; negatives below lo
/// are only counted. lo = -inf / hi = +inf for an open end.
struct Window {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};

class WindowScan final : public retrieval::detail::BlockConsumer {
 public:
  /// Most quantiles one scan serves (one window each, at most).
  static constexpr int kMaxWindows = 8;

  /// Whether window mode applies to `num_quantiles` quantiles over `num_negative` negatives.
  static bool applies(const PairStatisticsOptions& options, std::size_t num_quantiles, int64_t num_negative);

  /// Chooses the windows for the quantile ranks `positions` (one per fmr value) over
  /// `num_negative` negatives; positives go to `positives` when it keeps them.
  WindowScan(const PairScan& scan, const std::vector<QuantilePosition>& positions, int64_t num_negative,
             const PairStatisticsOptions& options, KeptPositives& positives);

  void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override;

  /// The values at every quantile's ranks, or nullopt when a rank lies outside its window (or
  /// the windows overflowed window_cap). Hands the collected values back: call once.
  std::optional<std::vector<RankValues>> read();

 private:
  void sample_windows(int64_t num_negative);

  const PairScan& scan_;
  std::vector<QuantilePosition> positions_;
  PairStatisticsOptions options_;
  KeptPositives& positives_;

  std::vector<Window> windows_;
  std::vector<int> window_of_quantile_;
  std::vector<std::vector<int64_t>> below_;              // per thread, per window
  std::vector<std::vector<std::vector<float>>> inside_;  // per thread, per window
  std::atomic<int64_t> collected_{0};
  std::atomic<bool> overflow_{false};
  std::unordered_map<int64_t, std::vector<int64_t>> gallery_by_label_;  // sorted positions
  std::vector<std::vector<int32_t>> candidates_;                        // per thread scratch
};

}  // namespace oml::metrics::detail
