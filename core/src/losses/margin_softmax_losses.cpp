#include "oml/losses/margin_softmax_losses.h"

#include <torch/torch.h>

#include <cmath>

#include "oml/common/autocast.h"
#include "oml/config/argument_error.h"
#include "pml_support.h"

namespace oml::losses {
namespace {

using detail::unit_rows;

// Cosines of the normalised embeddings and the normalised columns of `W` ([B, columns]).
torch::Tensor column_cosines(const torch::Tensor& embeddings, const torch::Tensor& W) {
  return torch::mm(unit_rows(embeddings), unit_rows(W.t()).t());
}

// PML's LargeMarginSoftmaxLoss step: the true class's cosine replaced by `modified(target cosine)`
// as PML writes it (cosine + one_hot * (modified - target)), scaled; then the mean cross-entropy.
template <class Modify>
torch::Tensor margin_cross_entropy(const torch::Tensor& cosines, const torch::Tensor& labels, double scale,
                                   Modify modified) {
  const auto target_class = labels.to(torch::kLong);
  const auto target = cosines.gather(1, target_class.unsqueeze(1));  // [B, 1]
  const auto is_target = losses::one_hot(target_class, cosines.size(1), cosines.scalar_type());
  const auto logits = (cosines + is_target * (modified(target) - target)) * scale;
  // Per item, then PML's MeanReducer (the reduction='mean' sum differs in the last bit).
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, target_class, F::CrossEntropyFuncOptions().reduction(torch::kNone)).mean();
}

}  // namespace

void check_options(const CosFaceOptions& o) {
  const std::string who = "loss 'cosface'";
  detail::check_class_sizes(o.num_classes, o.embedding_size, who);
  config::check_argument(o.margin >= 0, who, "margin", "margin must be >= 0, got ", o.margin);
  config::check_argument(o.scale > 0, who, "scale", "scale must be > 0, got ", o.scale);
  check_options(o.distance, who, {DistanceKind::cosine});
}

CosFaceLossImpl::CosFaceLossImpl(CosFaceOptions options) : options_(options) {
  check_options(options_);
  detail::require_class_sizes(options_.num_classes, options_.embedding_size, "cosface");
  W = register_parameter("W", torch::empty({options_.embedding_size, options_.num_classes}));
  torch::nn::init::normal_(W);  // PML's init
}

LossOutput CosFaceLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  detail::check_class_batch(embeddings, labels, options_.embedding_size, options_.num_classes, "cosface");
  const auto cosines = column_cosines(embeddings, W);
  const double margin = options_.margin;
  LossOutput out;
  out.loss = margin_cross_entropy(cosines, labels, options_.scale,
                                  [margin](const torch::Tensor& target) { return target - margin; });
  out.logs["accuracy"] = detail::accuracy(cosines, labels);
  return out;
}

void check_options(const SubCenterArcFaceOptions& o) {
  const std::string who = "loss 'sub_center_arcface'";
  detail::check_class_sizes(o.num_classes, o.embedding_size, who);
  config::check_argument(o.margin >= 0 && o.margin < 180, who, "margin",
                         "margin must be in [0, 180) degrees, got ", o.margin);
  config::check_argument(o.scale > 0, who, "scale", "scale must be > 0, got ", o.scale);
  config::check_argument(o.sub_centers >= 1, who, "sub_centers", "sub_centers must be >= 1, got ",
                         o.sub_centers);
  check_options(o.distance, who, {DistanceKind::cosine});
}

SubCenterArcFaceLossImpl::SubCenterArcFaceLossImpl(SubCenterArcFaceOptions options) : options_(options) {
  check_options(options_);
  detail::require_class_sizes(options_.num_classes, options_.embedding_size, "sub_center_arcface");
  W = register_parameter(
      "W", torch::empty({options_.embedding_size, options_.num_classes * options_.sub_centers}));
  torch::nn::init::normal_(W);  // PML's init
}

LossOutput SubCenterArcFaceLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const torch::Tensor embeddings = float32_input(input);
  detail::check_class_batch(embeddings, labels, options_.embedding_size, options_.num_classes,
                            "sub_center_arcface");
  // A class's cosine is its nearest sub-centre's (the gradient reaches that sub-centre only).
  const auto cosines = std::get<0>(
      column_cosines(embeddings, W).view({-1, options_.num_classes, options_.sub_centers}).max(2));
  const double margin = options_.margin * M_PI / 180;
  LossOutput out;
  out.loss = margin_cross_entropy(cosines, labels, options_.scale, [margin](const torch::Tensor& target) {
    // acos has infinite slope at +-1: keep the angle strictly inside (0, pi), as `arcface` does.
    constexpr double eps = 1e-7;
    const auto angles = torch::acos(target.clamp(-1 + eps, 1 - eps));
    return torch::where(angles <= M_PI - margin, torch::cos(angles + margin),
                        torch::cos(angles) - margin * std::sin(margin));
  });
  out.logs["accuracy"] = detail::accuracy(cosines, labels);
  return out;
}

void CosFaceLossImpl::check_labels(const torch::Tensor& labels) {
  detail::check_label_range(labels, options_.num_classes, "cosface");
}

void SubCenterArcFaceLossImpl::check_labels(const torch::Tensor& labels) {
  detail::check_label_range(labels, options_.num_classes, "sub_center_arcface");
}

}  // namespace oml::losses
