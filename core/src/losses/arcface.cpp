#include "oml/losses/arcface.h"

#include <torch/torch.h>

#include <cmath>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "pml_support.h"

namespace oml::losses {

void check_options(const ArcFaceOptions& o, const std::string& loss) {
  const std::string who = "loss '" + loss + "'";
  config::check_argument(o.in_features >= 0, who, "in_features",
                         "in_features must be > 0 (or 0: the extractor's size), got ", o.in_features);
  config::check_argument(o.num_classes == 0 || o.num_classes >= 2, who, "num_classes",
                         "num_classes must be >= 2 (or 0: the number of train labels), got ", o.num_classes);
  config::check_argument(o.s > 0 && std::isfinite(o.s), who, "s", "s must be a finite number > 0, got ", o.s);
  config::check_argument(std::isfinite(o.m), who, "m",
                         "m (the angular margin, in radians) must be a finite number, got ", o.m);
  config::check_argument(o.smoothing_epsilon >= 0 && o.smoothing_epsilon < 1, who, "smoothing_epsilon",
                         "smoothing_epsilon must be in [0, 1), got ", o.smoothing_epsilon);
  config::check_argument(o.reduction == "mean" || o.reduction == "sum", who, "reduction",
                         "reduction must be 'mean' or 'sum', got '", o.reduction, "'");
}

void check_options(const MLPArcFaceOptions& o) {
  check_options(o.arcface, "mlp_arcface");
  const std::string who = "loss 'mlp_arcface'";
  config::check_argument(!o.mlp_features.empty(), who, "mlp_features",
                         "mlp_features must list at least one layer size");
  for (const int64_t f : o.mlp_features) {
    config::check_argument(f > 0, who, "mlp_features", "mlp_features must be > 0, got ", f);
  }
}

ArcFaceLossImpl::ArcFaceLossImpl(ArcFaceOptions options, const std::string& name)
    : options_(std::move(options)), name_(name) {
  check_options(options_, name_);
  OML_CHECK(options_.in_features > 0 && options_.num_classes > 0, UsageError, name_,
            ": in_features and num_classes must be set, got ", options_.in_features, " and ",
            options_.num_classes);
  weight = register_parameter("weight", torch::empty({options_.num_classes, options_.in_features}));
  torch::nn::init::xavier_uniform_(weight);
}

torch::Tensor ArcFaceLossImpl::logits(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  namespace F = torch::nn::functional;
  const auto cos = torch::mm(F::normalize(embeddings, F::NormalizeFuncOptions().dim(1)),
                             F::normalize(weight, F::NormalizeFuncOptions().dim(1)).t());
  // OML's margin on the true class only: cos(theta + m) = cos cos_m - sin sin_m while
  // theta + m < pi, past it cos - m sin m (monotonic in theta).
  const double cos_m = std::cos(options_.m), sin_m = std::sin(options_.m);
  const auto index = labels.unsqueeze(1);
  const auto cos_target = cos.gather(1, index);
  // sqrt has an infinite slope at 0: keep |cos| strictly below 1 there (OML's gradient is NaN).
  constexpr double eps = 1e-7;
  const auto clamped = cos_target.clamp(-1 + eps, 1 - eps);
  const auto sin_target = torch::sqrt(1 - clamped * clamped);
  const auto with_margin = torch::where(cos_target > -cos_m, cos_target * cos_m - sin_target * sin_m,
                                        cos_target - sin_m * options_.m);
  return options_.s * cos.scatter(1, index, with_margin);
}

torch::Tensor ArcFaceLossImpl::targets(const torch::Tensor& labels) const {
  const double eps = options_.smoothing_epsilon;
  const int64_t classes = options_.num_classes;
  const auto one_hot = losses::one_hot(labels, classes, torch::kFloat);
  if (options_.label_categories.empty()) return one_hot * (1 - eps) + eps / static_cast<double>(classes);
  // OML's label_smoothing with categories: eps spread over the classes of the label's category.
  // A class without a category (beyond the train labels, or < 0) is a category of its own.
  std::vector<int64_t> categories(static_cast<std::size_t>(classes));
  for (int64_t c = 0; c < classes; ++c) {
    const auto i = static_cast<std::size_t>(c);
    const bool known = i < options_.label_categories.size() && options_.label_categories[i] >= 0;
    categories[i] = known ? options_.label_categories[i] : -1 - c;
  }
  const auto all = torch::tensor(categories, torch::kLong).to(labels.device(), /*non_blocking=*/true);
  const auto same = all.index_select(0, labels).unsqueeze(1) == all.unsqueeze(0);  // [B, C]
  const auto share = eps / same.sum(1, true).to(torch::kFloat);
  return torch::where(same, share, torch::zeros_like(share)) + one_hot * (1 - eps);
}

LossOutput ArcFaceLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, name_);
  OML_CHECK(embeddings.size(1) == options_.in_features, DataError, name_, ": expected embeddings of size ",
            options_.in_features, ", got ", embeddings.size(1));
  check_labels_on_host(*this, labels);
  const auto z = logits(embeddings, labels);
  const auto losses = -(targets(labels).to(z.scalar_type()) * torch::log_softmax(z, 1)).sum(1);
  LossOutput out;
  out.loss = options_.reduction == "mean" ? losses.mean() : losses.sum();
  torch::NoGradGuard no_grad;
  // Accuracy of the plain cosine classifier (without the margin, as at inference).
  const auto cos =
      torch::mm(embeddings, weight.t()) / (embeddings.norm(2, 1, true) * weight.norm(2, 1).unsqueeze(0));
  out.logs["accuracy"] = (cos.argmax(1) == labels).to(torch::kDouble).mean();
  return out;
}

void ArcFaceLossImpl::check_labels(const torch::Tensor& labels) {
  detail::check_label_range(labels, options_.num_classes, name_);
}

MLPArcFaceLossImpl::MLPArcFaceLossImpl(MLPArcFaceOptions options) : options_(std::move(options)) {
  check_options(options_);
  OML_CHECK(options_.arcface.in_features > 0, UsageError, "mlp_arcface: in_features must be set, got ",
            options_.arcface.in_features);
  // torchvision.ops.MLP with its defaults: per hidden size Linear, ReLU, Dropout(p=0); the last
  // size a Linear and a Dropout(p=0). The dropouts are identities, kept for the indices.
  mlp = torch::nn::Sequential();
  int64_t in = options_.arcface.in_features;
  for (std::size_t i = 0; i < options_.mlp_features.size(); ++i) {
    mlp->push_back(torch::nn::Linear(in, options_.mlp_features[i]));
    if (i + 1 < options_.mlp_features.size()) mlp->push_back(torch::nn::ReLU());
    mlp->push_back(torch::nn::Identity());
    in = options_.mlp_features[i];
  }
  register_module("mlp", mlp);
  ArcFaceOptions head = options_.arcface;
  head.in_features = in;
  arcface = register_module("arcface", ArcFaceLoss(head, "mlp_arcface"));
}

LossOutput MLPArcFaceLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the MLP and the loss in float32, as the other losses
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, "mlp_arcface");
  OML_CHECK(embeddings.size(1) == options_.arcface.in_features, DataError,
            "mlp_arcface: expected embeddings of size ", options_.arcface.in_features, " (in_features), got ",
            embeddings.size(1));
  return arcface->forward(mlp->forward(embeddings), labels);
}

void MLPArcFaceLossImpl::check_labels(const torch::Tensor& labels) { arcface->check_labels(labels); }

}  // namespace oml::losses
