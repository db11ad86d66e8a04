#include "oml/losses/proxy_losses.h"

#include <torch/torch.h>

#include <cmath>

#include "oml/common/autocast.h"
#include "oml/config/argument_error.h"
#include "pml_support.h"

namespace oml::losses {
namespace {

using detail::masked_logsumexp;

}  // namespace

void check_options(const ProxyAnchorOptions& o) {
  const std::string who = "loss 'proxy_anchor'";
  detail::check_class_sizes(o.num_classes, o.embedding_size, who);
  config::check_argument(o.margin >= 0, who, "margin", "margin must be >= 0, got ", o.margin);
  config::check_argument(o.alpha > 0, who, "alpha", "alpha must be > 0, got ", o.alpha);
  check_options(o.distance, who);
}

ProxyAnchorLossImpl::ProxyAnchorLossImpl(ProxyAnchorOptions options) : options_(options) {
  check_options(options_);
  detail::require_class_sizes(options_.num_classes, options_.embedding_size, "proxy_anchor");
  proxies = register_parameter("proxies", torch::empty({options_.num_classes, options_.embedding_size}));
  torch::nn::init::kaiming_normal_(proxies, 0, torch::kFanOut);  // PML's init
}

LossOutput ProxyAnchorLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  const int64_t num_classes = options_.num_classes;
  detail::check_class_batch(embeddings, labels, options_.embedding_size, num_classes, "proxy_anchor");
  const Distance distance(options_.distance);
  const auto cos = distance.matrix(embeddings, proxies);  // [B, C]
  // Per proxy (a row of the transposed [C, B] matrices): its class's items and the others.
  const auto is_class = losses::one_hot(labels, num_classes, torch::kBool).t();
  const double alpha = options_.alpha, margin = options_.margin;
  // For cosine: alpha (margin - cos) and alpha (cos + margin), PML's margin() in general.
  const auto pos_terms =
      masked_logsumexp(alpha * distance.margin(cos, margin).t(), is_class, /*add_one=*/true);
  const auto neg_terms =
      masked_logsumexp(alpha * distance.margin(-margin, cos).t(), ~is_class, /*add_one=*/true);
  // The proxies with an item in the batch (>= 1: the batch is not empty), counted on the device.
  const auto with_positives = is_class.any(1).sum();
  LossOutput out;
  const auto pos = pos_terms.sum() / with_positives;
  const auto neg = neg_terms.sum() / static_cast<double>(num_classes);
  out.loss = pos + neg;
  out.logs["pos_loss"] = pos.detach();
  out.logs["neg_loss"] = neg.detach();
  return out;
}

void check_options(const ProxyNCAOptions& o) {
  const std::string who = "loss 'proxy_nca'";
  detail::check_class_sizes(o.num_classes, o.embedding_size, who);
  config::check_argument(o.softmax_scale > 0, who, "softmax_scale", "softmax_scale must be > 0, got ",
                         o.softmax_scale);
  check_options(o.distance, who);
}

ProxyNCALossImpl::ProxyNCALossImpl(ProxyNCAOptions options) : options_(options) {
  check_options(options_);
  detail::require_class_sizes(options_.num_classes, options_.embedding_size, "proxy_nca");
  proxies = register_parameter("proxies", torch::empty({options_.num_classes, options_.embedding_size}));
  torch::nn::init::normal_(proxies);  // PML's init
}

LossOutput ProxyNCALossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const torch::Tensor embeddings = float32_input(input);
  detail::check_class_batch(embeddings, labels, options_.embedding_size, options_.num_classes, "proxy_nca");
  // PML's default LpDistance(power=2): the squared distance of the normalised vectors, negated.
  const Distance distance(options_.distance);
  const auto logits = options_.softmax_scale * distance.closeness(distance.matrix(embeddings, proxies));
  const auto target = labels.to(torch::kLong).unsqueeze(1);
  const auto log_probability = torch::log_softmax(logits, 1).gather(1, target).squeeze(1);
  // PML takes -log of the softmax and leaves out the items whose probability is exactly 0: their
  // mean as a masked sum over a count, read from nothing (0, attached, when none is left).
  const auto kept = (torch::softmax(logits.detach(), 1).gather(1, target).squeeze(1) != 0)
                        .to(log_probability.scalar_type());
  LossOutput out;
  out.loss = -(log_probability * kept).sum() / kept.sum().clamp_min(1);
  out.logs["accuracy"] = detail::accuracy(logits, labels);
  return out;
}

void check_options(const SoftTripleOptions& o) {
  const std::string who = "loss 'soft_triple'";
  detail::check_class_sizes(o.num_classes, o.embedding_size, who);
  config::check_argument(o.centers_per_class >= 1, who, "centers_per_class",
                         "centers_per_class must be >= 1, got ", o.centers_per_class);
  config::check_argument(o.la > 0, who, "la", "la must be > 0, got ", o.la);
  config::check_argument(o.gamma > 0, who, "gamma", "gamma must be > 0, got ", o.gamma);
  config::check_argument(o.margin >= 0, who, "margin", "margin must be >= 0, got ", o.margin);
  check_options(o.distance, who, {DistanceKind::cosine, DistanceKind::dot});
}

SoftTripleLossImpl::SoftTripleLossImpl(SoftTripleOptions options) : options_(options) {
  check_options(options_);
  detail::require_class_sizes(options_.num_classes, options_.embedding_size, "soft_triple");
  fc = register_parameter(
      "fc", torch::empty({options_.embedding_size, options_.num_classes * options_.centers_per_class}));
  torch::nn::init::kaiming_uniform_(fc, std::sqrt(5.0));  // PML's init
}

LossOutput SoftTripleLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const torch::Tensor embeddings = float32_input(input);
  const int64_t num_classes = options_.num_classes;
  detail::check_class_batch(embeddings, labels, options_.embedding_size, num_classes, "soft_triple");
  const auto to_centres = Distance(options_.distance)
                              .matrix(embeddings, fc.t())
                              .view({-1, num_classes, options_.centers_per_class});
  const auto weights = torch::softmax(to_centres * (1.0 / options_.gamma), 2);
  const auto to_classes = (weights * to_centres).sum(2);  // [B, C]
  const auto target = labels.to(torch::kLong);
  const auto margin = losses::one_hot(target, num_classes, to_classes.scalar_type()) * options_.margin;
  LossOutput out;
  namespace F = torch::nn::functional;
  // Per item, then PML's MeanReducer (the reduction='mean' sum differs in the last bit).
  out.loss = F::cross_entropy(options_.la * (to_classes - margin), target,
                              F::CrossEntropyFuncOptions().reduction(torch::kNone))
                 .mean();
  out.logs["accuracy"] = detail::accuracy(to_classes, labels);
  return out;
}

void ProxyAnchorLossImpl::check_labels(const torch::Tensor& labels) {
  detail::check_label_range(labels, options_.num_classes, "proxy_anchor");
}

void ProxyNCALossImpl::check_labels(const torch::Tensor& labels) {
  detail::check_label_range(labels, options_.num_classes, "proxy_nca");
}

void SoftTripleLossImpl::check_labels(const torch::Tensor& labels) {
  detail::check_label_range(labels, options_.num_classes, "soft_triple");
}

}  // namespace oml::losses
