#pragma once
// Postprocessors rewrite retrieval results before metrics are computed
// (docs/metrics.md#postprocessors-postprocessor): `constant_thresholding`, `adaptive_thresholding`
// and `pairwise_reranker` are built in; plugins register more in `registries().postprocessors`.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oml/retrieval/retrieval_results.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::retrieval {

/// Scores pairs (query dataset index, gallery dataset index), element by element; smaller
/// means "more alike", on the scale of a distance. Returns exactly one finite score per pair.
using PairScorer = std::function<std::vector<float>(const std::vector<int64_t>& query_ids,
                                                    const std::vector<int64_t>& gallery_ids)>;

/// What a postprocessor's build may use besides its args.
struct PostprocessorContext {
  /// The configured pairwise model as a scorer; empty when the config has no pairwise model.
  PairScorer pairwise_scores;
  /// The same model under half-precision autocast (OML's `use_fp16`), and which half it is:
  /// "float16" on CUDA, "bfloat16" on the CPU (float16 autocast needs CUDA). Empty: none.
  PairScorer half_precision_scores;
  std::string half_precision;
};

/// Contract for every postprocessor.
///
/// Requirements: `process` is a pure function of its input (same results in, same results
/// out); it keeps `n_gt`, the labels and the ids, and returns lists that are ascending by
/// distance and hold only gallery positions of the input. It may drop items (thresholding) or
/// reorder them (re-ranking) but never adds gallery items that were not retrieved.
/// Errors a user can cause are oml::Error (ConfigError for bad args at construction).
class Postprocessor {
 public:
  virtual ~Postprocessor() = default;
  virtual RetrievalResults process(const RetrievalResults& results) const = 0;
  /// Items per query this postprocessor needs retrieved (0: no requirement); the pipeline
  /// retrieves max(metric k, this).
  virtual int64_t required_top_k() const { return 0; }
  /// Registered name, for logs.
  virtual std::string name() const = 0;
};

/// `constant_thresholding` — keeps the retrieved items with distance < th (OML's definition).
struct ConstantThresholdingOptions {
  double th = 0.0;
};
std::shared_ptr<Postprocessor> make_constant_thresholding(const ConstantThresholdingOptions& options);

/// `adaptive_thresholding` — cuts each list after its first gap between consecutive distances
/// larger than n_std times the mean gap over all lists (OML's definition).
struct AdaptiveThresholdingOptions {
  double n_std = 0.0;
};
/// config::ArgumentError unless n_std > 0.
void check_options(const AdaptiveThresholdingOptions& options);
std::shared_ptr<Postprocessor> make_adaptive_thresholding(const AdaptiveThresholdingOptions& options);

/// `pairwise_reranker` (docs/metrics.md#pairwise-re-ranking) — re-scores the first min(top_n, R)
/// items of every query with the pairwise model (in batches of batch_size pairs), re-sorts them
/// ascending and keeps the tail; when the largest new head score exceeds the first tail
/// distance, the head is rescaled by tail[0] / head[-1] (shifted instead when tail[0] <= 0) and
/// moved down by a tiny epsilon so the list stays sorted.
struct PairwiseRerankerOptions {
  int64_t top_n = 5;
  int64_t batch_size = 128;
  bool use_fp16 = false;  ///< OML's: score under half-precision autocast (context.half_precision_scores)
};
/// config::ArgumentError naming the first bad field.
void check_options(const PairwiseRerankerOptions& options);
std::shared_ptr<Postprocessor> make_pairwise_reranker(const PairwiseRerankerOptions& options,
                                                      PairScorer scorer);

/// Registers the three built-ins above.
void register_builtin_postprocessors(Registries& registries);

}  // namespace oml::retrieval
