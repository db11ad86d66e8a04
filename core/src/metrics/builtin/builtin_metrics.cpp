#include "builtin_metrics.h"

#include <algorithm>

#include "oml/config/argument_error.h"
#include "oml/metrics/accuracy_calculator.h"

namespace oml::metrics::builtin {

namespace {
// A value listed twice is reported once (under the same key), first occurrence first.
template <class T>
std::vector<T> without_repeats(const std::vector<T>& values) {
  std::vector<T> out;
  for (const T& v : values) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}
}  // namespace

TopKMetric::TopKMetric(std::string metric, std::vector<int64_t> ks, PerQueryAtK at_k)
    : metric_(std::move(metric)), ks_(std::move(ks)), at_k_(at_k) {}

std::vector<std::string> TopKMetric::names() const {
  std::vector<std::string> names;
  for (const int64_t k : ks_) names.push_back(metric_ + "/" + std::to_string(k));
  return names;
}

int64_t TopKMetric::required_top_k() const { return *std::max_element(ks_.begin(), ks_.end()); }

MetricValues TopKMetric::compute(const MetricInputs& inputs) const {
  MetricValues values;
  for (const int64_t k : ks_) values.per_query[metric_ + "/" + std::to_string(k)] = at_k_(inputs.hits, k);
  return values;
}

std::vector<int64_t> read_top_k(config::ArgsReader& args, const std::string& metric,
                                std::vector<int64_t> ks) {
  const std::string key = metric + "_top_k";
  args.optional(key, ks);
  args.check([&] {
    for (const int64_t k : ks) {
      config::check_argument(k >= 1, "metric '" + metric + "'", key,
                             "k values must be positive integers, got ", k);
    }
  });
  return without_repeats(ks);
}

std::shared_ptr<Metric> top_k_metric(const std::string& metric, const std::vector<int64_t>& ks,
                                     PerQueryAtK at_k) {
  if (ks.empty()) return nullptr;
  return std::make_shared<TopKMetric>(metric, ks, at_k);
}

std::vector<double> read_fractions(config::ArgsReader& args, const std::string& metric,
                                   const std::string& key, const std::string& alias) {
  std::vector<double> values;
  if (alias.empty()) {
    args.optional(key, values);
  } else {
    args.optional(key, alias, values);
  }
  args.check([&] {
    for (const double v : values) {
      config::check_argument(v >= 0.0 && v <= 1.0, "metric '" + metric + "'", key,
                             "expected fractions in [0, 1], got ", v);
    }
  });
  return without_repeats(values);
}

bool read_switch(config::ArgsReader& args, const std::string& key, const std::string& alias) {
  bool on = false;
  if (alias.empty()) {
    args.optional(key, on);
  } else {
    args.optional(key, alias, on);
  }
  return on;
}

AccuracyCalculatorMetric::AccuracyCalculatorMetric(std::string name, PerQueryOfHits per_query)
    : name_(std::move(name)), per_query_(per_query) {}

MetricValues AccuracyCalculatorMetric::compute(const MetricInputs& inputs) const {
  const std::vector<double> per_query = per_query_(inputs.hits);
  MetricValues values;
  for (const auto& [group, queries] : queries_by_group(inputs))
    values.values[group + "/" + name_] = mean_with_ground_truth(per_query, queries);
  return values;
}

std::shared_ptr<Metric> accuracy_calculator_metric(const std::string& name, bool on,
                                                   PerQueryOfHits per_query) {
  if (!on) return nullptr;
  return std::make_shared<AccuracyCalculatorMetric>(name, per_query);
}

}  // namespace oml::metrics::builtin
