#pragma once
// What the built-in metrics share: the `metric_args:` reader, per-query metrics at k, and
// pytorch-metric-learning's AccuracyCalculator metrics averaged over queries with ground truth.

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

/// The switch `key` (or its other name `alias`, PML's spelling): true asks for the metric; off by
/// default, so that a run that does not name it computes nothing more.
bool read_switch(config::ArgsReader& args, const std::string& key, const std::string& alias = "");

/// Per-query values from the relevance flags, NaN for a query without ground truth
/// (oml/metrics/accuracy_calculator.h).
using PerQueryOfHits = std::vector<double> (*)(const QueryHits& hits);

/// One of PML's AccuracyCalculator k-NN metrics, reported as "<name>": the mean over the queries
/// that have ground truth (PML leaves its "lone" queries out), overall and per category. Its
/// lists reach down to the largest ground-truth count (k = "max_bin_count"). No per-query
/// values: a query without ground truth has none to show.
class AccuracyCalculatorMetric final : public Metric {
 public:
  AccuracyCalculatorMetric(std::string name, PerQueryOfHits per_query);
  std::vector<std::string> names() const override { return {name_}; }
  bool reads_to_max_ground_truth() const override { return true; }
  MetricValues compute(const MetricInputs& inputs) const override;

 private:
  std::string name_;
  PerQueryOfHits per_query_;
};

/// An AccuracyCalculatorMetric when `on`; nullptr otherwise.
std::shared_ptr<Metric> accuracy_calculator_metric(const std::string& name, bool on,
                                                   PerQueryOfHits per_query);

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
std::vector<int64_t> parse_ndcg(config::ArgsReader& args);
std::shared_ptr<Metric> build_ndcg(const std::vector<int64_t>& ks, const NoContext&);
bool parse_precision_at_1(config::ArgsReader& args);
std::shared_ptr<Metric> build_precision_at_1(const bool& on, const NoContext&);
bool parse_r_precision(config::ArgsReader& args);
std::shared_ptr<Metric> build_r_precision(const bool& on, const NoContext&);
bool parse_map_at_r(config::ArgsReader& args);
std::shared_ptr<Metric> build_map_at_r(const bool& on, const NoContext&);
bool parse_mrr(config::ArgsReader& args);
std::shared_ptr<Metric> build_mrr(const bool& on, const NoContext&);
bool parse_nmi(config::ArgsReader& args);
std::shared_ptr<Metric> build_nmi(const bool& on, const NoContext&);
bool parse_ami(config::ArgsReader& args);
std::shared_ptr<Metric> build_ami(const bool& on, const NoContext&);

}  // namespace oml::metrics::builtin
