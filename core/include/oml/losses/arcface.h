#pragma once
// OML's ArcFace losses: `criterion: {name: arcface, args: {m: 0.5, s: 64}}` (ArcFaceLoss) and
// `criterion: {name: mlp_arcface, args: {mlp_features: [512, 256]}}` (ArcFaceLossWithMLP).

#include <torch/nn/modules/container/sequential.h>

#include <string>
#include <vector>

#include "oml/losses/criterion.h"

namespace oml::losses {

struct ArcFaceOptions {
  int64_t in_features = 0;         ///< 0: the extractor's embedding size
  int64_t num_classes = 0;         ///< 0: the number of train labels
  double m = 0.5;                  ///< additive angular margin (radians)
  double s = 64.0;                 ///< logit scale
  double smoothing_epsilon = 0.0;  ///< label smoothing, 0 <= eps < 1
  std::string reduction = "mean";  ///< mean | sum (over the batch's cross-entropies)
  /// Category index of each label (OML's `label2category`, CriterionContext::label_categories);
  /// empty: none. With categories, smoothing spreads eps over the label's own category only.
  std::vector<int64_t> label_categories{};
};

/// config::ArgumentError naming the first bad field (in_features and num_classes only when set);
/// `loss` names the loss in messages.
void check_options(const ArcFaceOptions& options, const std::string& loss = "arcface");

/// ArcFace as OML's ArcFaceLoss: with cos the cosine between the normalised embedding and the
/// normalised class weight (parameter `weight` [num_classes, in_features]), the true class's
/// logit is s * cos(theta + m) while theta + m < pi (cos > -cos m), else s * (cos - m sin m); the
/// others' s * cos. Cross-entropy with targets (1 - eps) * one_hot + eps / num_classes, or, with
/// label categories, + eps / |category| over the label's category. Logs: `accuracy` (argmax of cos).
class ArcFaceLossImpl : public Criterion {
 public:
  explicit ArcFaceLossImpl(ArcFaceOptions options, const std::string& name = "arcface");
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  std::string log_name() const override { return "arcface"; }
  /// DataError unless every label is in [0, num_classes).
  void check_labels(const torch::Tensor& labels) override;
  /// s * margin-adjusted cosines [B, num_classes] (the logits fed to the cross-entropy).
  torch::Tensor logits(const torch::Tensor& embeddings, const torch::Tensor& labels);
  /// The cross-entropy targets [B, num_classes] of `labels` (smoothed as configured).
  torch::Tensor targets(const torch::Tensor& labels) const;

  torch::Tensor weight;

 private:
  ArcFaceOptions options_;
  std::string name_;
};
TORCH_MODULE(ArcFaceLoss);

struct MLPArcFaceOptions {
  ArcFaceOptions arcface;               ///< in_features: the MLP's input (0: the extractor's size)
  std::vector<int64_t> mlp_features{};  ///< the MLP's layer sizes; the last is ArcFace's in_features
};

void check_options(const MLPArcFaceOptions& options);

/// OML's ArcFaceLossWithMLP: torchvision's MLP(in_features, mlp_features) — Linear, ReLU per
/// hidden size, a last Linear (its Dropout(p=0) layers are identities) — then ArcFace on its
/// output. Parameters under OML's names: `mlp.0.weight`, `mlp.0.bias`, `mlp.3.weight`, ...,
/// `arcface.weight`, so OML's criterion state dict loads. Logs: ArcFace's `accuracy`.
class MLPArcFaceLossImpl : public Criterion {
 public:
  explicit MLPArcFaceLossImpl(MLPArcFaceOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  std::string log_name() const override { return "arcface"; }
  void check_labels(const torch::Tensor& labels) override;  ///< ArcFace's

  torch::nn::Sequential mlp{nullptr};
  ArcFaceLoss arcface{nullptr};

 private:
  MLPArcFaceOptions options_;
};
TORCH_MODULE(MLPArcFaceLoss);

}  // namespace oml::losses
