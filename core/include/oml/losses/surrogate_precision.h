#pragma once
// The surrogate precision@k loss: `criterion: {name: surrogate_precision, args: {k: 5}}`.

#include <string>

#include "oml/losses/criterion.h"

namespace oml::losses {

struct SurrogatePrecisionOptions {
  int64_t k = 5;
  double temperature1 = 1.0;       ///< smoothness of the "rank <= k" step (OML's t1)
  double temperature2 = 0.01;      ///< smoothness of the rank: pairwise comparisons of distances (OML's t2)
  int64_t chunk_size = 64;         ///< anchors processed together (memory chunk x B x B); oml-cpp's own
  std::string reduction = "mean";  ///< of the per-anchor precisions: mean or sum (OML's)
};

/// config::ArgumentError naming the first bad field.
void check_options(const SurrogatePrecisionOptions& options);

/// OML's SurrogatePrecision (Recall@k Surrogate, Patel et al.): with d the Euclidean distances,
/// rank(i, j) = sum over every l of sigmoid((d(i,j) - d(i,l)) / t2), hit(i, j) = sigmoid((k + 1 -
/// rank) / t1), precision_i = sum_{j with i's label} hit(i, j) / min(#items with i's label, k + 1)
/// — each item counts as its own nearest neighbour and positive, hence OML's k + 1 — and the loss
/// 1 - mean (or sum) of precision_i over the batch. Memory stays O(chunk x B^2) in forward and
/// backward (ranks are recomputed in chunks for the gradient; OML's is O(B^3)). Logs: `precision`
/// (the mean smoothed precision).
class SurrogatePrecisionImpl : public Criterion {
 public:
  explicit SurrogatePrecisionImpl(SurrogatePrecisionOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  std::string log_name() const override { return "surrogate_precision"; }

 private:
  SurrogatePrecisionOptions options_;
};
TORCH_MODULE(SurrogatePrecision);

/// The smoothed ranks defined above, [B, B] (rank(i, i) is the item's own rank, ~1/2 at low
/// temperatures), with a chunked custom backward.
torch::Tensor smooth_ranks(const torch::Tensor& distances, double temperature, int64_t chunk_size);

}  // namespace oml::losses
