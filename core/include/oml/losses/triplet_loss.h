#pragma once
// The triplet loss over a miner's triplets: `criterion: {name: triplet_with_miner, ...}`.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "oml/losses/criterion.h"
#include "oml/losses/miner.h"

namespace oml::losses {

/// `criterion: {name: triplet_with_miner, args: {margin: 0.1, miner: {name: hard_triplets}}}`
struct TripletOptions {
  std::optional<double> margin = 0.1;  ///< null: soft margin log(1 + exp(d(a,p) - d(a,n)))
  std::string reduction = "mean";      ///< mean | sum
};

/// config::ArgumentError naming the first bad field; `loss` names the loss in messages.
void check_options(const TripletOptions& options, const std::string& loss = "triplet_with_miner");

/// relu(margin + d(a,p) - d(a,n)) over the miner's triplets (its valid ones). Logs: `active_tri`
/// (fraction of triplets with a positive loss), `pos_dist`, `neg_dist` (mean d(a,p), d(a,n)),
/// `n_triplets`.
class TripletLossWithMinerImpl : public Criterion {
 public:
  TripletLossWithMinerImpl(std::shared_ptr<TripletMiner> miner, TripletOptions options = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  std::string log_name() const override { return "triplet"; }
  /// The miner's (TripletMiner::check_labels).
  void check_labels(const torch::Tensor& labels) override;

 private:
  std::shared_ptr<TripletMiner> miner_;
  TripletOptions options_;
};
TORCH_MODULE(TripletLossWithMiner);

/// OML's `TripletLoss` and `TripletLossPlain`: the batch itself is made of triplets, so no miner.
/// `criterion: {name: triplet, args: {margin: null, reduction: mean}}` takes the batch as
/// [anchors; positives; negatives], three consecutive blocks of B / 3 rows (what OML's
/// `TripletLoss(anchor, positive, negative)` is given, stacked); `triplet_plain` takes it as OML's
/// `TripletLossPlain` does, triplet i at rows 3i (anchor), 3i + 1 (positive), 3i + 2 (negative).
/// Loss and logs as triplet_with_miner's (without `n_triplets`). The labels only check the batch:
/// B must be a multiple of 3 and each triplet's anchor and positive must share a label that its
/// negative lacks (DataError naming the first triplet that does not), which a P x K batch fails.
enum class TripletLayout { blocks, interleaved };

class TripletLossImpl : public Criterion {
 public:
  TripletLossImpl(TripletLayout layout, TripletOptions options = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  std::string log_name() const override { return "triplet"; }
  /// Each triplet's anchor and positive share a label that its negative lacks.
  void check_labels(const torch::Tensor& labels) override;

 private:
  TripletLayout layout_;
  TripletOptions options_;
  std::string name_;  ///< triplet | triplet_plain (messages)
};
TORCH_MODULE(TripletLoss);

/// Loss of each triplet from its distances d(a, p) and d(a, n): relu(d_ap - d_an + margin), or
/// softplus(d_ap - d_an) (the soft margin) without a margin.
torch::Tensor triplet_losses_of_distances(const torch::Tensor& d_ap, const torch::Tensor& d_an,
                                          std::optional<double> margin);

/// Loss of a set of triplets given as embeddings (the formula of triplet_with_miner).
torch::Tensor triplet_losses(const torch::Tensor& anchors, const torch::Tensor& positives,
                             const torch::Tensor& negatives, std::optional<double> margin);

/// The Euclidean distances d(a, p) and d(a, n) of every triplet of `t` ([T] each), each the norm
/// of the difference of two pool rows. A list longer than half the pool's pairs (all_triplets
/// without a cap lists ~B^3 / 2 for a P x K batch) reads them from the pool's [M, M] distance
/// matrix (memory M^2 + T instead of T x D); a shorter one from the rows it names.
std::pair<torch::Tensor, torch::Tensor> triplet_distances(const TripletSet& t);

}  // namespace oml::losses
