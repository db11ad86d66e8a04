#include "oml/losses/pair_losses.h"

#include <torch/torch.h>

#include <limits>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "pml_support.h"

namespace oml::losses {
namespace {

using detail::masked_logsumexp;
using detail::mean_of_positive;
using detail::unit_rows;

// The pairs PML forms from labels: positives (same label, i != j) and negatives, both ordered.
struct PairMasks {
  torch::Tensor positive, negative;
};

PairMasks pair_masks(const torch::Tensor& labels, const std::string& who) {
  const auto same = labels.unsqueeze(0) == labels.unsqueeze(1);
  const auto eye =
      torch::eye(labels.size(0), torch::TensorOptions().dtype(torch::kBool).device(labels.device()));
  PairMasks masks{same & ~eye, ~same};
  // Without a positive pair the loss would only push items apart: a batch a P x K sampler never
  // gives (and PML's ContrastiveLoss would return 0 for a single pair of each kind).
  OML_CHECK(masks.positive.any().item<bool>(), DataError, who, ": no item of the batch (", labels.size(0),
            " items) has another item with its label — use a sampler such as 'balance'");
  return masks;
}

// A batch as the pair losses use it: float32 embeddings (under autocast too), their L2-normalised
// rows and PML's pair masks. The caller holds a Float32Guard for the whole forward.
struct PairBatch {
  torch::Tensor embeddings, unit;
  PairMasks masks;

  /// Cosine similarities of every pair [B, B] (PML's CosineSimilarity).
  torch::Tensor cosine() const { return torch::mm(unit, unit.t()); }
};

PairBatch pair_batch(const torch::Tensor& input, const torch::Tensor& labels, const std::string& who) {
  torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, who);
  PairMasks masks = pair_masks(labels, who);
  torch::Tensor unit = unit_rows(embeddings);
  return {std::move(embeddings), std::move(unit), std::move(masks)};
}

}  // namespace

void check_options(const ContrastiveOptions& o) {
  const std::string who = "loss 'contrastive'";
  config::check_argument(o.pos_margin >= 0, who, "pos_margin", "pos_margin must be >= 0, got ", o.pos_margin);
  config::check_argument(o.neg_margin >= 0, who, "neg_margin", "neg_margin must be >= 0, got ", o.neg_margin);
}

ContrastiveLossImpl::ContrastiveLossImpl(ContrastiveOptions options) : options_(options) {
  check_options(options_);
}

LossOutput ContrastiveLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const PairBatch b = pair_batch(input, labels, "contrastive");
  const auto& e = b.unit;
  const auto& masks = b.masks;
  const auto d = pairwise_distances(e, e);
  const auto pos =
      mean_of_positive(torch::relu(d.masked_select(masks.positive) - options_.pos_margin), b.embeddings);
  const auto neg =
      mean_of_positive(torch::relu(options_.neg_margin - d.masked_select(masks.negative)), b.embeddings);
  LossOutput out;
  out.loss = pos + neg;
  out.logs["pos_loss"] = pos.item<double>();
  out.logs["neg_loss"] = neg.item<double>();
  return out;
}

void check_options(const MultiSimilarityOptions& o) {
  const std::string who = "loss 'multi_similarity'";
  config::check_argument(o.alpha > 0, who, "alpha", "alpha must be > 0, got ", o.alpha);
  config::check_argument(o.beta > 0, who, "beta", "beta must be > 0, got ", o.beta);
}

MultiSimilarityLossImpl::MultiSimilarityLossImpl(MultiSimilarityOptions options) : options_(options) {
  check_options(options_);
}

LossOutput MultiSimilarityLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const PairBatch b = pair_batch(input, labels, "multi_similarity");
  const auto& masks = b.masks;
  const auto s = b.cosine();
  const double alpha = options_.alpha, beta = options_.beta, base = options_.base;
  const auto pos = masked_logsumexp(alpha * (base - s), masks.positive, /*add_one=*/true) / alpha;
  const auto neg = masked_logsumexp(beta * (s - base), masks.negative, /*add_one=*/true) / beta;
  LossOutput out;
  out.loss = (pos + neg).mean();
  out.logs["pos_loss"] = pos.mean().item<double>();
  out.logs["neg_loss"] = neg.mean().item<double>();
  return out;
}

void check_options(const TemperatureOptions& o, const std::string& loss) {
  config::check_argument(o.temperature > 0, "loss '" + loss + "'", "temperature",
                         "temperature must be > 0, got ", o.temperature);
}

SupConLossImpl::SupConLossImpl(TemperatureOptions options) : options_(options) {
  check_options(options_, "supcon");
}

LossOutput SupConLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const PairBatch b = pair_batch(input, labels, "supcon");
  const auto& masks = b.masks;
  const auto s = b.cosine() / options_.temperature;
  const auto others = masks.positive | masks.negative;  // every k != i
  const auto log_denominator = masked_logsumexp(s, others, /*add_one=*/false).unsqueeze(1);
  const auto positive = masks.positive.to(s.scalar_type());
  const auto mean_log_prob =
      (positive * (s - log_denominator)).sum(1) / (positive.sum(1) + std::numeric_limits<float>::min());
  LossOutput out;
  out.loss = mean_of_positive(-mean_log_prob, b.embeddings);
  return out;
}

NTXentLossImpl::NTXentLossImpl(TemperatureOptions options) : options_(options) {
  check_options(options_, "ntxent");
}

LossOutput NTXentLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const PairBatch b = pair_batch(input, labels, "ntxent");
  const auto& masks = b.masks;
  const auto s = b.cosine() / options_.temperature;
  const auto pairs = masks.positive.nonzero();  // (anchor, positive), row-major as PML's torch.where
  const auto anchors = pairs.select(1, 0), positives = pairs.select(1, 1);
  const auto pos = s.index({anchors, positives});
  const auto neg =
      s.index_select(0, anchors)
          .masked_fill(~masks.negative.index_select(0, anchors), std::numeric_limits<float>::lowest());
  const auto max_val = torch::max(pos, std::get<0>(neg.max(1))).detach();
  const auto numerator = torch::exp(pos - max_val);
  const auto denominator = torch::exp(neg - max_val.unsqueeze(1)).sum(1) + numerator;
  LossOutput out;
  out.loss = (-torch::log(numerator / denominator + std::numeric_limits<float>::min())).mean();
  return out;
}

void check_options(const CircleOptions& o) {
  const std::string who = "loss 'circle'";
  config::check_argument(o.m >= 0 && o.m < 1, who, "m", "m must be in [0, 1), got ", o.m);
  config::check_argument(o.gamma > 0, who, "gamma", "gamma must be > 0, got ", o.gamma);
}

CircleLossImpl::CircleLossImpl(CircleOptions options) : options_(options) { check_options(options_); }

LossOutput CircleLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const PairBatch b = pair_batch(input, labels, "circle");
  const auto& masks = b.masks;
  const auto s = b.cosine();
  const double gamma = options_.gamma, m = options_.m;
  // PML's op = 1 + m, on = -m, delta_p = 1 - m, delta_n = m; the weights are detached. Written
  // in PML's order of operations: the logits reach gamma * 2, where float32 rounding shows.
  const auto detached = s.detach();
  const auto pos_logits = -gamma * torch::relu((1 + m) - detached) * (s - (1 - m));
  const auto neg_logits = gamma * torch::relu(detached - (-m)) * (s - m);
  const auto logits = torch::where(masks.positive, pos_logits,
                                   torch::where(masks.negative, neg_logits, torch::zeros_like(s)));
  const auto lse_pos = masked_logsumexp(logits, masks.positive, /*add_one=*/false);
  const auto lse_neg = masked_logsumexp(logits, masks.negative, /*add_one=*/false);
  const auto counted = masks.positive.any(1) & masks.negative.any(1);
  const auto per_anchor =
      torch::softplus(lse_pos + lse_neg, /*beta=*/1, /*threshold=*/20) * counted.to(s.scalar_type());
  LossOutput out;
  out.loss = mean_of_positive(per_anchor, b.embeddings);
  return out;
}

}  // namespace oml::losses
