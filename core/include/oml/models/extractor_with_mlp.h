#pragma once
// An extractor followed by an MLP projection head; the backbone can be frozen for good or for
// the first epochs only.

#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <string>
#include <vector>

#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: extractor_with_mlp, args: {extractor: {name: resnet, ...},
///                                               mlp_features: [512, 128]}}`
struct ExtractorWithMLPOptions {
  std::vector<int64_t> mlp_features{128};  ///< layer sizes; ReLU between layers, none after the last
  bool train_backbone = true;              ///< false: backbone frozen for the whole run
  int64_t freeze_n_epochs = 0;             ///< backbone frozen during epochs [0, n)
  bool normalise_features = false;         ///< divide outputs by their detached L2 norm
  std::string weights;                     ///< file with weights of the whole model (backbone + mlp)
};

/// Names: `extractor.*` (the backbone's own names) and `projection.<i>.*`.
/// A frozen backbone has requires_grad = false and stays in eval mode (its BatchNorm statistics
/// do not move) even when the model is put in train mode. The model starts unfrozen; its args
/// only ask for freezing (requested_freezing), and the training loop sets the state at the
/// start of every epoch.
class ExtractorWithMLPImpl : public Extractor {
 public:
  ExtractorWithMLPImpl(std::shared_ptr<Extractor> backbone, ExtractorWithMLPOptions options = {});

  torch::Tensor forward(torch::Tensor images) override;
  int64_t feat_dim() const override;
  void train(bool on = true) override;

  bool freezable() const override { return true; }
  void set_backbone_frozen(bool frozen) override;
  /// `train_backbone: false` -> every epoch; otherwise the first `freeze_n_epochs`.
  BackboneFreezing requested_freezing() const override;
  bool backbone_frozen() const { return frozen_; }
  Extractor& backbone() { return *backbone_; }

 private:
  ExtractorWithMLPOptions options_;
  std::shared_ptr<Extractor> backbone_;
  torch::nn::Sequential projection_{nullptr};
  bool frozen_ = false;
};
TORCH_MODULE(ExtractorWithMLP);

}  // namespace oml::models
