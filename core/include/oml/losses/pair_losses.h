#pragma once
// pytorch-metric-learning's pair losses, equal to PML 2.8's defaults (docs/models.md#losses-criterion):
//
//   criterion: {name: contrastive, args: {pos_margin: 0, neg_margin: 1}}
//   criterion: {name: multi_similarity, args: {alpha: 2, beta: 50, base: 0.5}}
//   criterion: {name: supcon, args: {temperature: 0.1}}
//   criterion: {name: ntxent, args: {temperature: 0.07}}
//   criterion: {name: circle, args: {m: 0.4, gamma: 80}}
//
// Without a `miner:` they use every pair of the batch (each ordered pair (i, j), i != j, once per
// direction); with one (PML's `miner(embeddings, labels)` passed to the loss, e.g.
// `miner: {name: multi_similarity, args: {epsilon: 0.1}}`) only the pairs it selects, and the loss
// is 0 when it selects at most one of each kind (PML's rule). A batch without two items of one
// label is a DataError (check_labels): its loss could only push items apart. The losses read nothing back
// from the device: the zero loss of too few pairs, the pair sets and their means are chosen by masks, not on
// the host. `distance:` and `normalize_embeddings:` choose PML's distance object (oml/losses/distance.h); the
// formulas below are written for the default one. All compute in float32 under autocast, like the other
// built-in losses.

#include <memory>

#include "oml/losses/criterion.h"
#include "oml/losses/distance.h"
#include "oml/losses/miner.h"

namespace oml::losses {

/// PML's ContrastiveLoss with its default distance, LpDistance(normalize_embeddings=True, p=2):
/// d = Euclidean distance of the L2-normalised embeddings;
/// loss = mean over positive pairs with d > pos_margin of (d - pos_margin)
///      + mean over negative pairs with d < neg_margin of (neg_margin - d)
/// (PML's AvgNonZeroReducer per term; a term without such pairs is 0).
/// Logs: `pos_loss`, `neg_loss` (the two terms).
/// With a similarity (cosine, dot) PML's margin() turns the terms round: (pos_margin - s)+ and
/// (s - neg_margin)+, so such a config sets pos_margin: 1, neg_margin: 0 or similar.
struct ContrastiveOptions {
  double pos_margin = 0.0;
  double neg_margin = 1.0;
  DistanceOptions distance{DistanceKind::euclidean};
};

/// config::ArgumentError naming the first bad field (margins >= 0 for a distance).
void check_options(const ContrastiveOptions& options);

class ContrastiveLossImpl : public Criterion {
 public:
  explicit ContrastiveLossImpl(ContrastiveOptions options = {},
                               std::shared_ptr<PairSelectionMiner> miner = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< a label with two items

 private:
  ContrastiveOptions options_;
  std::shared_ptr<PairSelectionMiner> miner_;
};
TORCH_MODULE(ContrastiveLoss);

/// PML's MultiSimilarityLoss with its default distance, CosineSimilarity: s = cosine similarity;
/// per anchor i, with P(i) its positives (same label, j != i) and N(i) its negatives,
/// loss_i = 1/alpha log(1 + sum_{P(i)} exp(-alpha (s_ij - base)))
///        + 1/beta  log(1 + sum_{N(i)} exp( beta (s_ij - base)))
/// (a term over an empty set is 0); the loss is the mean over all anchors (PML's MeanReducer).
/// Logs: `pos_loss`, `neg_loss` (the two terms, averaged over anchors).
/// With a distance the terms are alpha (d_ij - base) and beta (base - d_ij) (PML's margin()).
struct MultiSimilarityOptions {
  double alpha = 2.0;
  double beta = 50.0;
  double base = 0.5;
  DistanceOptions distance{DistanceKind::cosine};
};

/// config::ArgumentError naming the first bad field (alpha, beta > 0).
void check_options(const MultiSimilarityOptions& options);

class MultiSimilarityLossImpl : public Criterion {
 public:
  explicit MultiSimilarityLossImpl(MultiSimilarityOptions options = {},
                                   std::shared_ptr<PairSelectionMiner> miner = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< a label with two items

 private:
  MultiSimilarityOptions options_;
  std::shared_ptr<PairSelectionMiner> miner_;
};
TORCH_MODULE(MultiSimilarityLoss);

/// The temperature of the softmax losses below (PML's `temperature`) and their distance (a
/// distance enters negated, as in PML).
struct TemperatureOptions {
  double temperature = 0.1;
  DistanceOptions distance{DistanceKind::cosine};
};

/// config::ArgumentError unless temperature > 0; `loss` names the loss in the message.
void check_options(const TemperatureOptions& options, const std::string& loss);

/// PML's SupConLoss with its default distance, CosineSimilarity: with s = cosine / temperature,
/// loss_i = -mean over positives j of (s_ij - log sum_{k != i} exp(s_ik)); the loss is the mean
/// over the anchors with a positive (PML's AvgNonZeroReducer). Temperature 0.1 by default.
class SupConLossImpl : public Criterion {
 public:
  explicit SupConLossImpl(TemperatureOptions options = {}, std::shared_ptr<PairSelectionMiner> miner = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< a label with two items

 private:
  TemperatureOptions options_;
  std::shared_ptr<PairSelectionMiner> miner_;
};
TORCH_MODULE(SupConLoss);

/// PML's NTXentLoss (InfoNCE) with CosineSimilarity: per positive pair (a, p), with s = cosine /
/// temperature, -log(exp(s_ap) / (exp(s_ap) + sum over a's negatives n of exp(s_an))); the loss
/// is the mean over all positive pairs (PML's MeanReducer). Temperature 0.07 by default.
class NTXentLossImpl : public Criterion {
 public:
  explicit NTXentLossImpl(TemperatureOptions options = {0.07},
                          std::shared_ptr<PairSelectionMiner> miner = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< a label with two items

 private:
  TemperatureOptions options_;
  std::shared_ptr<PairSelectionMiner> miner_;
};
TORCH_MODULE(NTXentLoss);

/// PML's CircleLoss with its default distance, CosineSimilarity: with s_p, s_n the cosine
/// similarities of an anchor's positive and negative pairs, and the weights computed without
/// gradient (detached, as in PML and the paper),
///   logit_p = -gamma * relu(1 + m - s_p) * (s_p - (1 - m)),
///   logit_n =  gamma * relu(s_n + m) * (s_n - m),
///   loss_i  = softplus(logsumexp over i's positives of logit_p + logsumexp over i's negatives of logit_n)
/// (torch's softplus: linear above 20); an anchor without a positive or a negative contributes 0,
/// and the loss is the mean of the positive per-anchor values (PML's AvgNonZeroReducer). Cosine
/// only (PML asserts it).
struct CircleOptions {
  double m = 0.4;       ///< relaxation: the optimum is s_p = 1 - m, s_n = m; 0 <= m < 1
  double gamma = 80.0;  ///< scale of the similarities, > 0
  DistanceOptions distance{DistanceKind::cosine};
};

/// config::ArgumentError naming the first bad field.
void check_options(const CircleOptions& options);

class CircleLossImpl : public Criterion {
 public:
  explicit CircleLossImpl(CircleOptions options = {}, std::shared_ptr<PairSelectionMiner> miner = {});
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< a label with two items

 private:
  CircleOptions options_;
  std::shared_ptr<PairSelectionMiner> miner_;
};
TORCH_MODULE(CircleLoss);

}  // namespace oml::losses
