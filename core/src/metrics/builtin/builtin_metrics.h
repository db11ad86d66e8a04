#pragma once
// What the built-in metrics share: the `metric_args:` reader and per-query metrics at k.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oml/config/args_reader.h"
#include "oml/metrics/metric.h"
#include "oml/registry/registry.h"

namespace oml::metrics::builtin {

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

/// The k values of `<metric>_top_k` (default `ks`), each checked to be a positive integer,
/// a repeated value once.
std::vector<int64_t> read_top_k(config::ArgsReader& args, const std::string& metric, std::vector<int64_t> ks);
/// A TopKMetric over `ks`; nullptr for an empty list (the config asks nothing of the metric).
std::shared_ptr<Metric> top_k_metric(const std::string& metric, const std::vector<int64_t>& ks,
                                     PerQueryAtK at_k);

/// The values of `key` (or of its other name `alias`; default: none), each checked to be a
/// fraction in [0, 1], a repeated value once.
std::vector<double> read_fractions(config::ArgsReader& args, const std::string& metric,
                                   const std::string& key, const std::string& alias = "");

// Each built-in: parse (its keys of `metric_args:`) and build, one file each.
std::vector<int64_t> parse_cmc(config::ArgsReader& args);
std::shared_ptr<Metric> build_cmc(const std::vector<int64_t>& ks, const NoContext&);
std::vector<int64_t> parse_precision(config::ArgsReader& args);
std::shared_ptr<Metric> build_precision(const std::vector<int64_t>& ks, const NoContext&);
std::vector<int64_t> parse_map(config::ArgsReader& args);
std::shared_ptr<Metric> build_map(const std::vector<int64_t>& ks, const NoContext&);
std::vector<double> parse_fnmr(config::ArgsReader& args);
std::shared_ptr<Metric> build_fnmr(const std::vector<double>& fmr_vals, const NoContext&);
std::vector<double> parse_pcf(config::ArgsReader& args);
std::shared_ptr<Metric> build_pcf(const std::vector<double>& variances, const NoContext&);

}  // namespace oml::metrics::builtin
