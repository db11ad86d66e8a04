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

// Every pair PML forms from labels: positives (same label, i != j) and negatives, both ordered.
MinedPairs all_pairs(const torch::Tensor& labels) {
  const auto same = labels.unsqueeze(0) == labels.unsqueeze(1);
  const auto eye =
      torch::eye(labels.size(0), torch::TensorOptions().dtype(torch::kBool).device(labels.device()));
  return {same & ~eye, ~same};
}

// A batch as the pair losses use it: the distance matrix of its float32 embeddings (under
// autocast too) and the pairs (all of them, or the miner's). The caller holds a Float32Guard for the whole
// forward. The conditions under which PML returns a zero loss are 0-d bool tensors on the batch's device,
// applied by zero_where: no step waits for the device to decide.
struct PairBatch {
  torch::Tensor values;
  MinedPairs pairs;

  /// PML's GenericPairLoss returns 0 when there is at most one pair of each kind (possible only
  /// with a miner: every positive pair (i, j) comes with (j, i)).
  torch::Tensor too_few_pairs() const { return (pairs.positive.sum() <= 1) & (pairs.negative.sum() <= 1); }
  /// PML's softmax losses (supcon, ntxent) are 0 also without a positive or without a negative pair.
  torch::Tensor lacks_a_kind() const {
    return too_few_pairs() | pairs.positive.any().logical_not() | pairs.negative.any().logical_not();
  }
  /// `out` where `zero` is false, else PML's zero loss and zero logs. The loss stays attached to
  /// the graph with a zero gradient, as PML's; the one computed beside it stays finite on any
  /// pair sets, so that its masked gradient is 0 and not NaN.
  static LossOutput zero_where(const torch::Tensor& zero, LossOutput out) {
    const auto zero_if = [&](const torch::Tensor& value) {
      return torch::where(zero, torch::zeros_like(value), value);
    };
    out.loss = zero_if(out.loss);
    for (auto& [key, value] : out.logs) value = zero_if(value);
    return out;
  }
};

PairBatch pair_batch(Criterion& loss, const torch::Tensor& input, const torch::Tensor& labels,
                     const Distance& distance, PairSelectionMiner* miner, const std::string& who) {
  torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, who);
  check_labels_on_host(loss, labels);
  MinedPairs pairs = miner != nullptr ? miner->mine(embeddings, labels) : all_pairs(labels);
  return {distance.matrix(embeddings, embeddings), std::move(pairs)};
}

}  // namespace

void check_options(const ContrastiveOptions& o) {
  const std::string who = "loss 'contrastive'";
  check_options(o.distance, who);
  // Distances are >= 0, so a negative margin would make its term a constant; similarities may
  // take any margin (PML's cosine configs use pos_margin 1, neg_margin 0).
  if (!larger_is_closer(o.distance.kind)) {
    config::check_argument(o.pos_margin >= 0, who, "pos_margin", "pos_margin must be >= 0, got ",
                           o.pos_margin);
    config::check_argument(o.neg_margin >= 0, who, "neg_margin", "neg_margin must be >= 0, got ",
                           o.neg_margin);
  }
}

ContrastiveLossImpl::ContrastiveLossImpl(ContrastiveOptions options,
                                         std::shared_ptr<PairSelectionMiner> miner)
    : options_(options), miner_(std::move(miner)) {
  check_options(options_);
}

LossOutput ContrastiveLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const Distance distance(options_.distance);
  const PairBatch b = pair_batch(*this, input, labels, distance, miner_.get(), "contrastive");
  const auto& d = b.values;
  // Each term over the pairs of its kind; the others enter its mean as 0, which it leaves out.
  const auto pos = mean_of_positive(torch::relu(distance.margin(d, options_.pos_margin)) * b.pairs.positive);
  const auto neg = mean_of_positive(torch::relu(distance.margin(options_.neg_margin, d)) * b.pairs.negative);
  LossOutput out;
  out.loss = pos + neg;
  out.logs["pos_loss"] = pos.detach();
  out.logs["neg_loss"] = neg.detach();
  return b.zero_where(b.too_few_pairs(), std::move(out));
}

void ContrastiveLossImpl::check_labels(const torch::Tensor& labels) {
  require_positive_pair(labels, "contrastive");
}

void check_options(const MultiSimilarityOptions& o) {
  const std::string who = "loss 'multi_similarity'";
  config::check_argument(o.alpha > 0, who, "alpha", "alpha must be > 0, got ", o.alpha);
  config::check_argument(o.beta > 0, who, "beta", "beta must be > 0, got ", o.beta);
  check_options(o.distance, who);
}

MultiSimilarityLossImpl::MultiSimilarityLossImpl(MultiSimilarityOptions options,
                                                 std::shared_ptr<PairSelectionMiner> miner)
    : options_(options), miner_(std::move(miner)) {
  check_options(options_);
}

LossOutput MultiSimilarityLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const Distance distance(options_.distance);
  const PairBatch b = pair_batch(*this, input, labels, distance, miner_.get(), "multi_similarity");
  const double alpha = options_.alpha, beta = options_.beta, base = options_.base;
  const auto pos =
      masked_logsumexp(alpha * distance.margin(b.values, base), b.pairs.positive, /*add_one=*/true) / alpha;
  const auto neg =
      masked_logsumexp(beta * distance.margin(base, b.values), b.pairs.negative, /*add_one=*/true) / beta;
  LossOutput out;
  out.loss = (pos + neg).mean();
  out.logs["pos_loss"] = pos.mean().detach();
  out.logs["neg_loss"] = neg.mean().detach();
  return b.zero_where(b.too_few_pairs(), std::move(out));
}

void MultiSimilarityLossImpl::check_labels(const torch::Tensor& labels) {
  require_positive_pair(labels, "multi_similarity");
}

void check_options(const TemperatureOptions& o, const std::string& loss) {
  config::check_argument(o.temperature > 0, "loss '" + loss + "'", "temperature",
                         "temperature must be > 0, got ", o.temperature);
  check_options(o.distance, "loss '" + loss + "'");
}

SupConLossImpl::SupConLossImpl(TemperatureOptions options, std::shared_ptr<PairSelectionMiner> miner)
    : options_(options), miner_(std::move(miner)) {
  check_options(options_, "supcon");
}

LossOutput SupConLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const Distance distance(options_.distance);
  const PairBatch b = pair_batch(*this, input, labels, distance, miner_.get(), "supcon");
  const auto& pairs = b.pairs;
  const auto s = distance.closeness(b.values) / options_.temperature;
  const auto others = pairs.positive | pairs.negative;  // every k != i, or the miner's pairs
  const auto log_denominator = masked_logsumexp(s, others, /*add_one=*/false).unsqueeze(1);
  const auto positive = pairs.positive.to(s.scalar_type());
  const auto mean_log_prob =
      (positive * (s - log_denominator)).sum(1) / (positive.sum(1) + std::numeric_limits<float>::min());
  LossOutput out;
  out.loss = mean_of_positive(-mean_log_prob);
  return b.zero_where(b.lacks_a_kind(), std::move(out));
}

void SupConLossImpl::check_labels(const torch::Tensor& labels) { require_positive_pair(labels, "supcon"); }

NTXentLossImpl::NTXentLossImpl(TemperatureOptions options, std::shared_ptr<PairSelectionMiner> miner)
    : options_(options), miner_(std::move(miner)) {
  check_options(options_, "ntxent");
}

LossOutput NTXentLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const Distance distance(options_.distance);
  const PairBatch b = pair_batch(*this, input, labels, distance, miner_.get(), "ntxent");
  const auto& pairs = b.pairs;
  const auto s = distance.closeness(b.values) / options_.temperature;
  // PML's per positive pair (i, j): exp(s_ij) over it plus anchor i's negatives, each shifted by
  // the detached M_ij = max(s_ij, max_n s_in). Here for every entry of the [B, B] matrix at once,
  // the negatives' sum taken as exp(lse_i - M_ij) with lse_i their logsumexp (0 for a row
  // without negatives); the entries that are not positive pairs are masked out of the mean.
  constexpr float lowest = std::numeric_limits<float>::lowest();
  const auto negatives_max = std::get<0>(s.masked_fill(~pairs.negative, lowest).max(1, /*keepdim=*/true));
  const auto max_val = torch::max(s, negatives_max).detach();
  const auto numerator = torch::exp(s - max_val);
  const auto has_negatives = pairs.negative.any(1, /*keepdim=*/true);
  const auto negatives_lse = masked_logsumexp(s, pairs.negative, /*add_one=*/false).unsqueeze(1);
  // exp(lowest) = 0: a row without negatives adds nothing, and its gradient stays finite.
  const auto negatives =
      torch::exp(torch::where(has_negatives, negatives_lse - max_val, torch::full_like(s, lowest)));
  const auto losses = -torch::log(numerator / (negatives + numerator) + std::numeric_limits<float>::min());
  const auto positive = pairs.positive.to(s.scalar_type());
  LossOutput out;
  out.loss = (losses * positive).sum() / positive.sum().clamp_min(1);  // PML's MeanReducer over the pairs
  return b.zero_where(b.lacks_a_kind(), std::move(out));
}

void NTXentLossImpl::check_labels(const torch::Tensor& labels) { require_positive_pair(labels, "ntxent"); }

void check_options(const CircleOptions& o) {
  const std::string who = "loss 'circle'";
  config::check_argument(o.m >= 0 && o.m < 1, who, "m", "m must be in [0, 1), got ", o.m);
  config::check_argument(o.gamma > 0, who, "gamma", "gamma must be > 0, got ", o.gamma);
  check_options(o.distance, who, {DistanceKind::cosine});
}

CircleLossImpl::CircleLossImpl(CircleOptions options, std::shared_ptr<PairSelectionMiner> miner)
    : options_(options), miner_(std::move(miner)) {
  check_options(options_);
}

LossOutput CircleLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;
  const PairBatch b = pair_batch(*this, input, labels, Distance(options_.distance), miner_.get(), "circle");
  const auto& pairs = b.pairs;
  const auto& s = b.values;
  const double gamma = options_.gamma, m = options_.m;
  // PML's op = 1 + m, on = -m, delta_p = 1 - m, delta_n = m; the weights are detached. Written
  // in PML's order of operations: the logits reach gamma * 2, where float32 rounding shows.
  const auto detached = s.detach();
  const auto pos_logits = -gamma * torch::relu((1 + m) - detached) * (s - (1 - m));
  const auto neg_logits = gamma * torch::relu(detached - (-m)) * (s - m);
  const auto logits = torch::where(pairs.positive, pos_logits,
                                   torch::where(pairs.negative, neg_logits, torch::zeros_like(s)));
  const auto lse_pos = masked_logsumexp(logits, pairs.positive, /*add_one=*/false);
  const auto lse_neg = masked_logsumexp(logits, pairs.negative, /*add_one=*/false);
  const auto counted = pairs.positive.any(1) & pairs.negative.any(1);
  const auto per_anchor =
      torch::softplus(lse_pos + lse_neg, /*beta=*/1, /*threshold=*/20) * counted.to(s.scalar_type());
  LossOutput out;
  out.loss = mean_of_positive(per_anchor);
  return b.zero_where(b.too_few_pairs(), std::move(out));
}

void CircleLossImpl::check_labels(const torch::Tensor& labels) { require_positive_pair(labels, "circle"); }

}  // namespace oml::losses
