#pragma once
// Pairwise models: score a pair of items (embeddings or images) for re-ranking
// (docs/models.md#pairwise-models-pairwise_model, docs/metrics.md#pairwise-re-ranking).

#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <vector>

#include "oml/models/extractor.h"

namespace oml::models {

/// Contract for every pairwise model:
/// - `forward(x1, x2)` (training) returns one logit per pair [B]; it is trained with
///   binary cross-entropy on logits where target 1 means "different labels".
/// - `predict(x1, x2)` returns one score per pair [B] where smaller means more similar; it must
///   be monotonic in the probability of "different", so re-ranking can sort by it.
/// - `takes_images()` says whether x1/x2 are image batches [B, C, H, W] or embeddings [B, D].
class PairwiseModel : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x1, torch::Tensor x2) = 0;
  virtual torch::Tensor predict(torch::Tensor x1, torch::Tensor x2) = 0;
  virtual bool takes_images() const = 0;
  /// Whether the model has a backbone that `freeze_n_epochs` can freeze (OML's IFreezable).
  virtual bool freezable() const { return false; }
  /// While frozen, forward runs the backbone without gradients, so only the head trains (OML's
  /// `train_backbone = False`). Only called on freezable models.
  virtual void set_backbone_frozen(bool frozen) { (void)frozen; }
};

/// `linear_siamese(feat_dim, identity_init = true)`: ||P x1 - P x2||_2 + b on embeddings. With
/// P = I and b = 0 it returns the plain Euclidean distance (re-ranking leaves results unchanged).
class LinearSiameseImpl : public PairwiseModel {
 public:
  LinearSiameseImpl(int64_t feat_dim, bool identity_init);
  /// config::ArgumentError unless feat_dim > 0.
  static void check(int64_t feat_dim);
  torch::Tensor forward(torch::Tensor x1, torch::Tensor x2) override;
  torch::Tensor predict(torch::Tensor x1, torch::Tensor x2) override { return forward(x1, x2); }
  bool takes_images() const override { return false; }

 private:
  torch::Tensor proj_, bias_;
};
TORCH_MODULE(LinearSiamese);

/// `trivial_distance_siamese(extractor)`: ||E(x1) - E(x2)||_2 + b on images.
class TrivialDistanceSiameseImpl : public PairwiseModel {
 public:
  explicit TrivialDistanceSiameseImpl(std::shared_ptr<Extractor> extractor);
  torch::Tensor forward(torch::Tensor x1, torch::Tensor x2) override;
  torch::Tensor predict(torch::Tensor x1, torch::Tensor x2) override { return forward(x1, x2); }
  bool takes_images() const override { return true; }

 private:
  std::shared_ptr<Extractor> extractor_;
  torch::Tensor bias_;
};
TORCH_MODULE(TrivialDistanceSiamese);

/// `concat_siamese(extractor, mlp_hidden_dims, use_tta_swap)`: the two images stacked along the
/// height go through one extractor, an MLP head maps the embedding to a logit; predict = sigmoid
/// of it, averaged over both orders of the pair when use_tta_swap. The head is OML's
/// (torchvision's MLP with Sigmoid activations): Linear, Sigmoid, Dropout(0.5) per hidden size,
/// then a Linear to one logit without bias — so OML's checkpoints load (head.0, head.3, ...).
class ConcatSiameseImpl : public PairwiseModel {
 public:
  ConcatSiameseImpl(std::shared_ptr<Extractor> extractor, std::vector<int64_t> mlp_hidden_dims,
                    bool use_tta_swap);
  /// config::ArgumentError unless every hidden size is > 0.
  static void check(const std::vector<int64_t>& mlp_hidden_dims);
  torch::Tensor forward(torch::Tensor x1, torch::Tensor x2) override;
  torch::Tensor predict(torch::Tensor x1, torch::Tensor x2) override;
  bool takes_images() const override { return true; }
  bool freezable() const override { return true; }
  void set_backbone_frozen(bool frozen) override { backbone_frozen_ = frozen; }

 private:
  std::shared_ptr<Extractor> extractor_;
  torch::nn::Sequential head_{nullptr};
  bool use_tta_swap_;
  bool backbone_frozen_ = false;
};
TORCH_MODULE(ConcatSiamese);

}  // namespace oml::models
