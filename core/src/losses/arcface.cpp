#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/losses/arcface.h"

namespace oml::losses {

void check_options(const ArcFaceOptions& o) {
  const std::string who = "loss 'arcface'";
  config::check_argument(o.in_features >= 0, who, "in_features",
                         "in_features must be > 0 (or 0: the extractor's size), got ", o.in_features);
  config::check_argument(o.num_classes == 0 || o.num_classes >= 2, who, "num_classes",
                         "num_classes must be >= 2 (or 0: the number of train labels), got ", o.num_classes);
  config::check_argument(o.s > 0, who, "s", "s must be > 0, got ", o.s);
  config::check_argument(o.smoothing_epsilon >= 0 && o.smoothing_epsilon < 1, who, "smoothing_epsilon",
                         "smoothing_epsilon must be in [0, 1), got ", o.smoothing_epsilon);
}

ArcFaceLossImpl::ArcFaceLossImpl(ArcFaceOptions options) : options_(options) {
  check_options(options_);
  OML_CHECK(options_.in_features > 0 && options_.num_classes > 0, UsageError,
            "arcface: in_features and num_classes must be set, got ", options_.in_features, " and ",
            options_.num_classes);
  weight = register_parameter("weight", torch::empty({options_.num_classes, options_.in_features}));
  torch::nn::init::xavier_uniform_(weight);
}

torch::Tensor ArcFaceLossImpl::logits(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  namespace F = torch::nn::functional;
  const auto cos = torch::mm(F::normalize(embeddings, F::NormalizeFuncOptions().dim(1)),
                             F::normalize(weight, F::NormalizeFuncOptions().dim(1)).t());
  // acos has infinite slope at +-1: keep theta strictly inside (0, pi).
  constexpr double eps = 1e-7;
  const auto theta = torch::acos(cos.clamp(-1 + eps, 1 - eps));
  const auto is_target = torch::one_hot(labels, options_.num_classes).to(torch::kBool);
  return options_.s * torch::where(is_target, torch::cos(theta + options_.m), cos);
}

LossOutput ArcFaceLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, "arcface");
  OML_CHECK(embeddings.size(1) == options_.in_features, DataError, "arcface: expected embeddings of size ",
            options_.in_features, ", got ", embeddings.size(1));
  const int64_t lo = labels.min().item<int64_t>(), hi = labels.max().item<int64_t>();
  OML_CHECK(lo >= 0 && hi < options_.num_classes, DataError, "arcface: labels must be in [0, ",
            options_.num_classes, "), got ", lo, "..", hi, " (num_classes too small for the train labels?)");
  const auto z = logits(embeddings, labels);
  const double eps = options_.smoothing_epsilon;
  const auto targets = torch::one_hot(labels, options_.num_classes).to(z.scalar_type()) * (1 - eps) +
                       eps / static_cast<double>(options_.num_classes);
  LossOutput out;
  out.loss = -(targets * torch::log_softmax(z, 1)).sum(1).mean();
  torch::NoGradGuard no_grad;
  // Accuracy of the plain cosine classifier (without the margin, as at inference).
  const auto cos =
      torch::mm(embeddings, weight.t()) / (embeddings.norm(2, 1, true) * weight.norm(2, 1).unsqueeze(0));
  out.logs["accuracy"] = (cos.argmax(1) == labels).to(torch::kDouble).mean().item<double>();
  return out;
}

}  // namespace oml::losses
