#pragma once
// pytorch-metric-learning's margin softmax losses, equal to PML 2.8's defaults
// (docs/models.md#losses-criterion):
//
//   criterion: {name: cosface, args: {margin: 0.35, scale: 64}}
//   criterion: {name: sub_center_arcface, args: {margin: 28.6, scale: 64, sub_centers: 3}}
//
// A cosine classifier with class weights of its own (parameter `W`, PML's name and shape
// [embedding_size, classes], standard normal as PML initialises it), optimised with `loss_lr`
// and kept in checkpoints; cross-entropy of the scaled, margin-adjusted cosines, averaged over the
// batch (PML's MeanReducer). num_classes and embedding_size default to 0: the number of train
// labels and the extractor's embedding size. Labels must be in [0, num_classes). Float32 under
// autocast, like the other built-in losses. (The project's own `arcface`, OML's, is in arcface.h.)

#include "oml/losses/criterion.h"
#include "oml/losses/distance.h"

namespace oml::losses {

/// PML's CosFaceLoss (large margin cosine loss): logits s * (cos(theta_c) - margin [c = label]),
/// theta_c the angle between the embedding and class c's column of `W`.
/// Logs: `accuracy` (argmax of the cosines).
struct CosFaceOptions {
  int64_t num_classes = 0;                         ///< 0: the number of train labels
  int64_t embedding_size = 0;                      ///< 0: the extractor's embedding size
  double margin = 0.35;                            ///< subtracted from the true class's cosine, >= 0
  double scale = 64.0;                             ///< > 0
  DistanceOptions distance{DistanceKind::cosine};  ///< cosine only (PML asserts it); accepted for PML configs
};

/// config::ArgumentError naming the first bad field (num_classes and embedding_size only when set).
void check_options(const CosFaceOptions& options);

class CosFaceLossImpl : public Criterion {
 public:
  explicit CosFaceLossImpl(CosFaceOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< labels in [0, num_classes)

  torch::Tensor W;  ///< PML's name

 private:
  CosFaceOptions options_;
};
TORCH_MODULE(CosFaceLoss);

/// PML's SubCenterArcFaceLoss: every class has sub_centers columns of `W` ([embedding_size,
/// num_classes * sub_centers], class c's are c * sub_centers ...), and a class's cosine is the
/// largest of its sub-centres'. Then PML's ArcFaceLoss: for the true class, with theta = acos(cos),
/// cos(theta + m) when theta <= pi - m, else cos(theta) - m sin(m) (keeps the logit decreasing);
/// logits times `scale`. The margin is in degrees, as in PML (28.6 degrees = 0.5 rad); note that
/// the project's `arcface` (OML's) takes `m` in radians.
/// Differs from PML only where a true-class cosine is within 1.2e-7 of +-1: clamped there, as
/// `arcface` does, so that acos's gradient stays finite (PML's is infinite, a NaN step).
/// PML's get_outliers (dropping items far from their class's dominant sub-centre) is not here.
/// Logs: `accuracy` (argmax of the class cosines).
struct SubCenterArcFaceOptions {
  int64_t num_classes = 0;                         ///< 0: the number of train labels
  int64_t embedding_size = 0;                      ///< 0: the extractor's embedding size
  double margin = 28.6;                            ///< additive angular margin in degrees, in [0, 180)
  double scale = 64.0;                             ///< > 0
  int64_t sub_centers = 3;                         ///< >= 1
  DistanceOptions distance{DistanceKind::cosine};  ///< cosine only (PML asserts it); accepted for PML configs
};

/// config::ArgumentError naming the first bad field (num_classes and embedding_size only when set).
void check_options(const SubCenterArcFaceOptions& options);

class SubCenterArcFaceLossImpl : public Criterion {
 public:
  explicit SubCenterArcFaceLossImpl(SubCenterArcFaceOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< labels in [0, num_classes)

  torch::Tensor W;  ///< PML's name

 private:
  SubCenterArcFaceOptions options_;
};
TORCH_MODULE(SubCenterArcFaceLoss);

}  // namespace oml::losses
