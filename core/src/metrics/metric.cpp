#include "oml/metrics/metric.h"

#include <cstdio>
#include <cstdlib>

namespace oml::metrics {

std::unique_ptr<PairPass> Metric::start_pair_pass(const PairPassInputs& /*inputs*/) const { return nullptr; }

std::map<std::string, std::vector<int64_t>> queries_by_group(const MetricInputs& inputs) {
  std::map<std::string, std::vector<int64_t>> groups;
  auto& everyone = groups[kOverall];
  for (std::size_t q = 0; q < inputs.query_rows.size(); ++q) {
    everyone.push_back(static_cast<int64_t>(q));
    if (inputs.per_category)
      groups[inputs.set.categories[inputs.query_rows[q]]].push_back(static_cast<int64_t>(q));
  }
  return groups;
}

std::string format_key_number(double value) {
  char text[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace oml::metrics
