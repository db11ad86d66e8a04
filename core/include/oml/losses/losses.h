#pragma once
// The built-in losses (docs/models.md#losses-criterion).

#include <memory>
#include <optional>
#include <string>

#include "oml/losses/criterion.h"
#include "oml/losses/miner.h"

namespace oml::losses {

/// `criterion: {name: triplet_with_miner, args: {margin: 0.1, miner: {name: hard_triplets}}}`
struct TripletOptions {
  std::optional<double> margin = 0.1;  ///< null: soft margin log(1 + exp(d(a,p) - d(a,n)))
  std::string reduction = "mean";      ///< mean | sum
};

/// relu(margin + d(a,p) - d(a,n)) over the miner's triplets. Logs: `active_tri` (fraction of
/// triplets with a positive loss), `pos_dist`, `neg_dist` (mean d(a,p), d(a,n)), `n_triplets`.
class TripletLossWithMinerImpl : public Criterion {
 public:
  TripletLossWithMinerImpl(std::shared_ptr<TripletMiner> miner, TripletOptions options = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;

 private:
  std::shared_ptr<TripletMiner> miner_;
  TripletOptions options_;
};
TORCH_MODULE(TripletLossWithMiner);

/// Loss of a set of triplets given as embeddings (the formula of triplet_with_miner).
torch::Tensor triplet_losses(const torch::Tensor& anchors, const torch::Tensor& positives,
                             const torch::Tensor& negatives, std::optional<double> margin);

struct ArcFaceOptions {
  int64_t in_features = 0;         ///< 0: the extractor's embedding size
  int64_t num_classes = 0;         ///< 0: the number of train labels
  double m = 0.5;                  ///< additive angular margin (radians)
  double s = 64.0;                 ///< logit scale
  double smoothing_epsilon = 0.0;  ///< label smoothing, 0 <= eps < 1
};

/// ArcFace: logits = s * cos(theta + m) for the true class and s * cos(theta) for the others,
/// theta the angle between the normalised embedding and the normalised class weight
/// (parameter `weight` [num_classes, in_features]); cross-entropy with targets
/// (1 - eps) * one_hot + eps / num_classes. Logs: `accuracy` (argmax of cos(theta)).
class ArcFaceLossImpl : public Criterion {
 public:
  explicit ArcFaceLossImpl(ArcFaceOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  /// s * margin-adjusted cosines [B, num_classes] (the logits fed to the cross-entropy).
  torch::Tensor logits(const torch::Tensor& embeddings, const torch::Tensor& labels);

  torch::Tensor weight;

 private:
  ArcFaceOptions options_;
};
TORCH_MODULE(ArcFaceLoss);

struct SurrogatePrecisionOptions {
  int64_t k = 5;
  double temperature1 = 1.0;   ///< smoothness of the rank (pairwise comparisons of distances)
  double temperature2 = 0.01;  ///< smoothness of the "rank <= k" step
  int64_t chunk_size = 64;     ///< anchors processed together (memory chunk x B x B)
};

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

 private:
  SurrogatePrecisionOptions options_;
};
TORCH_MODULE(SurrogatePrecision);

/// Smoothed ranks as defined above, [B, B] (the diagonal is meaningless), with a chunked
/// custom backward.
torch::Tensor smooth_ranks(const torch::Tensor& distances, double temperature, int64_t chunk_size);

}  // namespace oml::losses
