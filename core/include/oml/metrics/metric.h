#pragma once
// The metric interface: one validation metric, computed from the k-NN result that validation
// shares between all metrics.
//
// Metrics are components of the kind `metrics` (registries().metrics). The built-ins — cmc,
// precision, map, ndcg, fnmr, pcf and pytorch-metric-learning's AccuracyCalculator metrics
// (mean_average_precision_at_r, r_precision, mrr, precision_at_1, nmi, ami) — live in
// core/src/metrics/builtin/, one file each; plugins register more (docs/plugins.md,
// plugins/examples/recall_metric.cpp). configure_metrics() (metric_table.h) builds every
// registered metric from the run's `metric_args:` once, into the MetricTable that validation,
// the checkpoint-metric check and every record of the run read.
//
// ## Contract (what an implementation must provide and guarantee)
//
// Parse and build (oml/registry/registry.h). All metrics share one args mapping, `metric_args:`:
// a metric's parse reads its own keys from it through the shared reader (reading a key declares
// it: a key no metric reads is an error that lists every metric's keys) and checks their values
// (a bad value is config::check_argument(...) naming the key). Its build returns nullptr when
// the options ask for nothing of it (e.g. an empty list of k values); it has no context. Keys
// are `<metric>_<what>` (`cmc_top_k`) so that metrics do not collide.
//
// Names. names() are the key stems the metric reports, fixed at construction: "cmc/1",
// "fnmr@fmr/0.1". Each is reported as "OVERALL/<stem>" and, for metrics that break results
// down by category, "<category>/<stem>". Numbers in stems are printed with std::to_string
// (integers) or format_key_number (fractions). A stem must not be another metric's stem.
//
// Compute. compute() is a const, deterministic function of its inputs, called once per
// validation on one rank. It returns either per-query values (one per query, in query order;
// the table averages them over every query and over each category's queries and keeps them
// for worst-query reports) or values it aggregates itself under full keys ("OVERALL/<stem>",
// "<category>/<stem>"), or both. It must produce "OVERALL/<stem>" for every stem of names()
// and no stem that names() does not list: the table checks this and reports a plugin that
// breaks it as a PluginError. Problems with the data are DataError.
//
// Depth. A metric reads the first required_top_k() items of every list, or — with
// reads_to_max_ground_truth() — the first R, the most relevant items any query has (map@R).
//
// Pairs. A metric over every (query, gallery) pair rather than the top-k lists (fnmr@fmr)
// overrides needs_pair_pass() and start_pair_pass(): its consumer then sees every distance
// block while the retrieval computes them, and compute() finds the pass in MetricInputs.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oml/metrics/embedding_set.h"
#include "oml/metrics/retrieval_metrics.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::metrics {

/// The reporting group of every query and of metrics without categories.
inline const std::string kOverall = "OVERALL";

/// The inputs of a pair pass (see Metric::start_pair_pass): the distance engine's view of one
/// validation.
struct PairPassInputs {
  const retrieval::detail::PreparedPair& pair;  ///< queries and gallery as the engine holds them
  const retrieval::IgnoredPairs& ignored;       ///< pairs that count for nothing
  const std::vector<int64_t>& query_labels;
  const std::vector<int64_t>& gallery_labels;
  const std::vector<int64_t>& n_gt;  ///< relevant gallery items per query
  retrieval::BlockShape shape;       ///< the block shape of the retrieval, for further passes
};

/// State a metric collects while the retrieval computes the distance blocks.
class PairPass {
 public:
  virtual ~PairPass() = default;
  /// Receives every block of the retrieval, in order.
  virtual retrieval::detail::BlockConsumer& consumer() = 0;
};

/// Everything a metric computes from: one validation's rows and its retrieval.
struct MetricInputs {
  const EmbeddingSet& set;                       ///< the validation rows
  const retrieval::RetrievalResults& retrieval;  ///< top-k lists, after the postprocessor
  const QueryHits& hits;                         ///< relevance of every retrieved item
  const std::vector<int64_t>& query_rows;        ///< row of `set` of each query, in query order
  /// Whether values are wanted per category too: the rows have categories and
  /// `return_only_overall_category` is false.
  bool per_category;
  PairPass* pair_pass;  ///< what start_pair_pass returned; null without one
};

/// What compute() returns (see the contract above).
struct MetricValues {
  /// Stem ("cmc/1") -> one value per query, in query order.
  std::map<std::string, std::vector<double>> per_query;
  /// Full key ("OVERALL/fnmr@fmr/0.1", "<category>/pcf/0.5") -> value.
  std::map<std::string, double> values;
};

class Metric {
 public:
  virtual ~Metric() = default;

  /// The key stems this metric reports (non-empty).
  virtual std::vector<std::string> names() const = 0;
  /// The retrieved items per query it reads (cmc@5 reads 5); 0 when it reads no lists.
  virtual int64_t required_top_k() const { return 0; }
  /// Whether it reads every query's list down to R, the largest number of relevant gallery
  /// items of any query (map@R; PML's k = "max_bin_count"). R depends on the data, so validation
  /// counts it from the labels before the retrieval and retrieves max(required_top_k, R).
  virtual bool reads_to_max_ground_truth() const { return false; }
  /// Whether it needs a pass over every (query, gallery) pair (start_pair_pass).
  virtual bool needs_pair_pass() const { return false; }
  /// Starts the pass whose consumer rides on the retrieval's distance blocks.
  virtual std::unique_ptr<PairPass> start_pair_pass(const PairPassInputs& inputs) const;
  /// The metric's values for one validation.
  virtual MetricValues compute(const MetricInputs& inputs) const = 0;
};

/// The queries (indices in query order) of every reporting group: "OVERALL" holds them all and,
/// with `inputs.per_category`, each category its own. The table averages per-query values over
/// these; a metric that aggregates itself uses the same groups.
std::map<std::string, std::vector<int64_t>> queries_by_group(const MetricInputs& inputs);

/// The shortest decimal text that reads back as `value` ("0.01", "0.5", "1"), for key stems.
std::string format_key_number(double value);

}  // namespace oml::metrics
