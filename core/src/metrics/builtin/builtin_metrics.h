#pragma once
// What the built-in metrics share: the `metric_args:` reader and per-query metrics at k.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oml/config/reader.h"
#include "oml/metrics/metric.h"

namespace oml::metrics::builtin {

/// The `metric_args:` reader the table passes to every metric factory.
config::MapReader& args_of(const MetricContext& context);

/// A per-query metric at k (cmc_at_k, precision_at_k, ...).
using PerQueryAtK = std::vector<double> (*)(const QueryHits& hits, int64_t k);

/// Reports "<metric>/<k>" for every k: per-query values, averaged per category by the table.
class TopKMetric final : public Metric {
 public:
  TopKMetric(std::string metric, std::vector<int64_t> ks, PerQueryAtK at_k);
  std::vector<std::string> names() const override;
  int64_t required_top_k() const override;
  MetricValues compute(const MetricInputs& inputs) const override;

 private:
  std::string metric_;
  std::vector<int64_t> ks_;
  PerQueryAtK at_k_;
};

/// A TopKMetric over the k values of `<metric>_top_k` (default `ks`), each checked to be a
/// positive integer; nullptr for an empty list.
std::shared_ptr<Metric> make_top_k_metric(const MetricContext& context, const std::string& metric,
                                          std::vector<int64_t> ks, PerQueryAtK at_k);

/// The values of `key` (or of its other name `alias`; default: none), each checked to be a
/// fraction in [0, 1].
std::vector<double> read_fractions(const MetricContext& context, const std::string& metric,
                                   const std::string& key, const std::string& alias = "");

}  // namespace oml::metrics::builtin
