#pragma once
// fnmr@fmr (docs/metrics.md#fnmrfmr): the threshold T is the quantile of the negative-pair distances at
// fmr, with linear interpolation exactly as numpy.quantile / torch.quantile (method "linear");
// fnmr is the fraction of positive-pair distances >= T.
//
// These functions take the distances in memory (small sets, tests). EmbeddingMetrics computes
// the same values over all Q x G pairs in bounded memory (see detail/pair_statistics.h).

#include <cstdint>
#include <vector>

namespace oml::metrics {

/// Where the q-quantile of n sorted values lies: between ranks `lower` and `upper` (0-based,
/// upper = min(lower + 1, n - 1)) at `fraction` of the way.
struct QuantilePosition {
  int64_t lower = 0;
  int64_t upper = 0;
  double fraction = 0.0;
};
QuantilePosition quantile_position(int64_t n, double q);

/// numpy's linear interpolation between the two ranks' values (numerically the same formula).
double interpolate(double lower_value, double upper_value, double fraction);

/// numpy.quantile(values, q). Throws UsageError for an empty input or q outside [0, 1].
double quantile_linear(std::vector<double> values, double q);

/// fnmr@fmr for every fmr value; NaN when there are no positive or no negative distances.
std::vector<double> fnmr_at_fmr(const std::vector<double>& positive, std::vector<double> negative,
                                const std::vector<double>& fmr_vals);

}  // namespace oml::metrics
