#pragma once
// The metrics of a run, built once from its `metric_args:`: what validation computes, which
// keys it reports, and so which keys metric_for_checkpointing and monitor_metric may name.
//
//   const metrics::MetricTable table = metrics::configure_metrics(config.metric_args);
//   table.overall_keys();          // {"OVERALL/cmc/1", "OVERALL/cmc/5", "OVERALL/map/5", ...}
//   options.metrics = table;       // EmbeddingMetricsOptions: computes exactly these
//
// Every registered metric (registries().metrics, plugins included) reads its own keys of
// `metric_args:`; the table reads `return_only_overall_category`. Bad values and keys that no
// metric reads are ConfigErrors pointing at the config, raised here — before any work — and
// nowhere else.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oml/config/node.h"
#include "oml/metrics/metric.h"

namespace oml::metrics {

class MetricTable {
 public:
  /// One configured metric.
  struct Entry {
    std::string name;    ///< its registered name ("cmc")
    std::string origin;  ///< "built-in" or the plugin that registered it
    std::shared_ptr<const Metric> metric;
    std::vector<std::string> names;  ///< metric->names(), read once
  };

  /// A table that computes nothing (validation then only retrieves).
  MetricTable() = default;
  MetricTable(std::vector<Entry> entries, bool only_overall);

  const std::vector<Entry>& entries() const { return entries_; }
  /// "OVERALL/<stem>" of every metric, in table order (metrics by registered name).
  std::vector<std::string> overall_keys() const;
  /// The retrieved items per query the metrics read (the largest required_top_k, at least 1).
  int64_t required_top_k() const;
  /// Whether a metric reads every list down to the largest ground-truth count
  /// (Metric::reads_to_max_ground_truth): validation then retrieves at least that many.
  bool reads_to_max_ground_truth() const;
  bool needs_pair_pass() const;
  /// `return_only_overall_category: true`: no per-category keys.
  bool only_overall() const { return only_overall_; }

  /// Starts the pair pass of every metric that needs one (one slot per entry, null for the
  /// others).
  std::vector<std::unique_ptr<PairPass>> start_pair_passes(const PairPassInputs& inputs) const;

  /// Computes every metric: `inputs.pair_pass` is taken from `passes`, per-query values are
  /// averaged over OVERALL and, with `inputs.per_category`, over each category's queries.
  /// Fills `metrics` (flat keys) and `per_query` (stems). Throws PluginError (InternalError
  /// for a built-in) when a metric reports other keys than it declared.
  void compute(const MetricInputs& inputs, const std::vector<std::unique_ptr<PairPass>>& passes,
               std::map<std::string, double>& metrics,
               std::map<std::string, std::vector<double>>& per_query) const;

 private:
  std::vector<Entry> entries_;
  bool only_overall_ = false;
};

/// Builds every registered metric from `metric_args` (undefined or null: every default).
/// ConfigError for an unknown key or a bad value (naming the key and its place); PluginError
/// when two metrics report the same key.
MetricTable configure_metrics(const config::Node& metric_args);

/// The two keys of `metric_args:` OML uses for its plots, read by configure_metrics with the
/// others: which per-query metrics get worst-query grids (training with log_images, oml-validate
/// --visualize).
struct VisualizationOptions {
  /// `metrics_to_exclude_from_visualization`: metric names ("cmc", all its k) or per-query names
  /// ("cmc/5") that get no grid.
  std::vector<std::string> excluded;
  /// `visualize_only_overall_category` (OML's default true): false adds, per category of the
  /// dataframe, a grid of that category's worst queries.
  bool only_overall = true;

  bool excludes(const std::string& per_query_name) const;
};

/// Reads VisualizationOptions from `metric_args` (ConfigError for a bad value).
VisualizationOptions visualization_options(const config::Node& metric_args);

}  // namespace oml::metrics
