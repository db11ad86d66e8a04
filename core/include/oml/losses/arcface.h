#pragma once
// The ArcFace loss: `criterion: {name: arcface, args: {m: 0.5, s: 64}}`.

#include "oml/losses/criterion.h"

namespace oml::losses {

struct ArcFaceOptions {
  int64_t in_features = 0;         ///< 0: the extractor's embedding size
  int64_t num_classes = 0;         ///< 0: the number of train labels
  double m = 0.5;                  ///< additive angular margin (radians)
  double s = 64.0;                 ///< logit scale
  double smoothing_epsilon = 0.0;  ///< label smoothing, 0 <= eps < 1
};

/// config::ArgumentError naming the first bad field (in_features and num_classes only when set).
void check_options(const ArcFaceOptions& options);

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

}  // namespace oml::losses
