#pragma once
// The triplet loss over a miner's triplets: `criterion: {name: triplet_with_miner, ...}`.

#include <memory>
#include <optional>
#include <string>

#include "oml/losses/criterion.h"
#include "oml/losses/miner.h"

namespace oml::losses {

/// `criterion: {name: triplet_with_miner, args: {margin: 0.1, miner: {name: hard_triplets}}}`
struct TripletOptions {
  std::optional<double> margin = 0.1;  ///< null: soft margin log(1 + exp(d(a,p) - d(a,n)))
  std::string reduction = "mean";      ///< mean | sum
};

/// config::ArgumentError naming the first bad field.
void check_options(const TripletOptions& options);

/// relu(margin + d(a,p) - d(a,n)) over the miner's triplets. Logs: `active_tri` (fraction of
/// triplets with a positive loss), `pos_dist`, `neg_dist` (mean d(a,p), d(a,n)), `n_triplets`.
class TripletLossWithMinerImpl : public Criterion {
 public:
  TripletLossWithMinerImpl(std::shared_ptr<TripletMiner> miner, TripletOptions options = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;

 private:
  std::shared_ptr<TripletMiner> miner_;
  TripletOptions options_;
};
TORCH_MODULE(TripletLossWithMiner);

/// Loss of a set of triplets given as embeddings (the formula of triplet_with_miner).
torch::Tensor triplet_losses(const torch::Tensor& anchors, const torch::Tensor& positives,
                             const torch::Tensor& negatives, std::optional<double> margin);

}  // namespace oml::losses
