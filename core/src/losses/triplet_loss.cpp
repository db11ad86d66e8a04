#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/losses/triplet_loss.h"

namespace oml::losses {

torch::Tensor triplet_losses(const torch::Tensor& anchors, const torch::Tensor& positives,
                             const torch::Tensor& negatives, std::optional<double> margin) {
  const auto gap = (anchors - positives).norm(2, 1) - (anchors - negatives).norm(2, 1);
  // softplus(x) = log(1 + exp(x)) without overflow for large x.
  return margin ? torch::relu(gap + *margin) : torch::nn::functional::softplus(gap);
}

void check_options(const TripletOptions& o) {
  const std::string who = "loss 'triplet_with_miner'";
  config::check_argument(o.reduction == "mean" || o.reduction == "sum", who, "reduction",
                         "reduction must be 'mean' or 'sum', got '", o.reduction, "'");
  config::check_argument(!o.margin || *o.margin >= 0, who, "margin",
                         "margin must be >= 0 (or null for the soft margin), got ", o.margin.value_or(0.0));
}

TripletLossWithMinerImpl::TripletLossWithMinerImpl(std::shared_ptr<TripletMiner> miner,
                                                   TripletOptions options)
    : miner_(std::move(miner)), options_(std::move(options)) {
  OML_ASSERT(miner_ != nullptr);
  check_options(options_);
}

LossOutput TripletLossWithMinerImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, "triplet_with_miner");
  const TripletSet t = miner_->mine(embeddings, labels);
  const auto a = t.pool.index_select(0, t.anchors);
  const auto p = t.pool.index_select(0, t.positives);
  const auto n = t.pool.index_select(0, t.negatives);
  const auto losses = triplet_losses(a, p, n, options_.margin);
  LossOutput out;
  out.loss = options_.reduction == "mean" ? losses.mean() : losses.sum();
  torch::NoGradGuard no_grad;
  out.logs["active_tri"] = (losses > 0).to(torch::kDouble).mean().item<double>();
  out.logs["pos_dist"] = (a - p).norm(2, 1).mean().item<double>();
  out.logs["neg_dist"] = (a - n).norm(2, 1).mean().item<double>();
  out.logs["n_triplets"] = static_cast<double>(t.size());
  return out;
}

}  // namespace oml::losses
