#pragma once
// The surrogate precision@k loss: `criterion: {name: surrogate_precision, args: {k: 5}}`.

#include "oml/losses/criterion.h"

namespace oml::losses {

struct SurrogatePrecisionOptions {
  int64_t k = 5;
  double temperature1 = 1.0;   ///< smoothness of the rank (pairwise comparisons of distances)
  double temperature2 = 0.01;  ///< smoothness of the "rank <= k" step
  int64_t chunk_size = 64;     ///< anchors processed together (memory chunk x B x B)
};

/// config::ArgumentError naming the first bad field.
void check_options(const SurrogatePrecisionOptions& options);

/// 1 - smoothed precision@k (docs/metrics.md#metrics's precision@k with ranks replaced by sigmoids):
/// rank(i, j) = 1 + sum_{l != i, j} sigmoid((d(i,j) - d(i,l)) / t1), hit(i, j) = sigmoid((k + 1/2 -
/// rank) / t2), precision_i = sum_{j positive} hit(i, j) / min(k, #positives of i); averaged over
/// anchors with a positive. At low temperatures it equals 1 - exact precision@k. Memory stays
/// O(chunk x B^2) in forward and backward (ranks are recomputed in chunks for the gradient).
/// Logs: `precision` (the smoothed precision).
class SurrogatePrecisionImpl : public Criterion {
 public:
  explicit SurrogatePrecisionImpl(SurrogatePrecisionOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< a label with two items
  std::string log_name() const override { return "surrogate_precision"; }

 private:
  SurrogatePrecisionOptions options_;
};
TORCH_MODULE(SurrogatePrecision);

/// Smoothed ranks as defined above, [B, B] (the diagonal is meaningless), with a chunked
/// custom backward.
torch::Tensor smooth_ranks(const torch::Tensor& distances, double temperature, int64_t chunk_size);

}  // namespace oml::losses
