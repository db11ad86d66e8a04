#include "oml/metrics/metric.h"

#include <cstdio>
#include <cstdlib>

namespace oml::metrics {

std::unique_ptr<PairPass> Metric::start_pair_pass(const PairPassInputs& /*inputs*/) const { return nullptr; }

std::string format_key_number(double value) {
  char text[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace oml::metrics
