#include "oml/metrics/fnmr.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "oml/common/error.h"

namespace oml::metrics {

QuantilePosition quantile_position(int64_t n, double q) {
  OML_CHECK(n > 0, UsageError, "quantile of an empty set");
  OML_CHECK(q >= 0.0 && q <= 1.0, UsageError, "quantile level must be within [0, 1], got ", q);
  const double virtual_index = static_cast<double>(n - 1) * q;
  QuantilePosition position;
  position.lower = std::min<int64_t>(static_cast<int64_t>(std::floor(virtual_index)), n - 1);
  position.upper = std::min<int64_t>(position.lower + 1, n - 1);
  position.fraction = virtual_index - static_cast<double>(position.lower);
  return position;
}

double interpolate(double lower_value, double upper_value, double fraction) {
  // numpy's _lerp: from the nearer end, so that fraction 1 gives exactly the upper value.
  const double difference = upper_value - lower_value;
  if (fraction >= 0.5) return upper_value - difference * (1.0 - fraction);
  return lower_value + difference * fraction;
}

double quantile_linear(std::vector<double> values, double q) {
  const QuantilePosition position = quantile_position(static_cast<int64_t>(values.size()), q);
  std::nth_element(values.begin(), values.begin() + position.lower, values.end());
  const double lower = values[position.lower];
  double upper = lower;
  if (position.upper != position.lower) {
    upper = *std::min_element(values.begin() + position.lower + 1, values.end());
  }
  return interpolate(lower, upper, position.fraction);
}

std::vector<double> fnmr_at_fmr(const std::vector<double>& positive, std::vector<double> negative,
                                const std::vector<double>& fmr_vals) {
  std::vector<double> out;
  for (const double fmr : fmr_vals) {
    if (!(fmr >= 0.0 && fmr <= 1.0))
      throw SettingError("metric_args.fmr_vals",
                         ::oml::detail::concat("values must be within [0, 1], got ", fmr));
    if (positive.empty() || negative.empty()) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    const double threshold = quantile_linear(negative, fmr);
    const auto above =
        std::count_if(positive.begin(), positive.end(), [&](double d) { return d >= threshold; });
    out.push_back(static_cast<double>(above) / static_cast<double>(positive.size()));
  }
  return out;
}

}  // namespace oml::metrics
