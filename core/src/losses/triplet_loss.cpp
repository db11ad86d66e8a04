#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/losses/triplet_loss.h"

namespace oml::losses {

torch::Tensor triplet_losses(const torch::Tensor& anchors, const torch::Tensor& positives,
                             const torch::Tensor& negatives, std::optional<double> margin) {
  const auto gap = (anchors - positives).norm(2, 1) - (anchors - negatives).norm(2, 1);
  // softplus(x) = log(1 + exp(x)) without overflow for large x.
  return margin ? torch::relu(gap + *margin) : torch::nn::functional::softplus(gap);
}

TripletLossWithMinerImpl::TripletLossWithMinerImpl(std::shared_ptr<TripletMiner> miner,
                                                   TripletOptions options)
    : miner_(std::move(miner)), options_(std::move(options)) {
  OML_ASSERT(miner_ != nullptr);
  OML_CHECK(options_.reduction == "mean" || options_.reduction == "sum", ConfigError,
            "triplet_with_miner: reduction must be 'mean' or 'sum', got '", options_.reduction, "'");
  OML_CHECK(!options_.margin || *options_.margin >= 0, ConfigError,
            "triplet_with_miner: margin must be >= 0 (or null for the soft margin), got ", *options_.margin);
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
