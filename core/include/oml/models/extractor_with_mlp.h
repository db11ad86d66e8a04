#pragma once
// An extractor followed by an MLP projection head; the backbone can be frozen for good or for
// the first epochs only.

#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <string>
#include <vector>

#include "oml/io/state_dict.h"
#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: extractor_with_mlp, args: {extractor: {name: resnet, ...},
///                                               mlp_features: [512, 128]}}`
struct ExtractorWithMLPOptions {
  std::vector<int64_t> mlp_features{128};  ///< layer sizes; ReLU between layers, none after the last
  bool train_backbone = true;              ///< false: backbone frozen for the whole run
  int64_t freeze_n_epochs = 0;             ///< backbone frozen during epochs [0, n)
  bool normalise_features = false;         ///< divide outputs by their detached L2 norm
  std::string weights;  ///< file or zoo name with weights of the whole model (backbone + mlp)
};

/// config::ArgumentError naming the first bad field.
void check_options(const ExtractorWithMLPOptions& options);

/// OML's ExtractorWithMLP, with its state dict names, so that its checkpoints (and OML's zoo
/// model vits16_224_mlp_384_inshop) load here and ours load there with strict=True:
/// - the backbone under `extractor.` and, for backbones OML wraps (vit, resnet: see
///   Extractor::oml_module_attribute), below `extractor.model.`;
/// - the projection as torchvision.ops.MLP: Linear, ReLU, Dropout(0) per hidden layer, then
///   Linear, Dropout(0) — `projection.0`, `projection.3`, ... (the Dropout(0) positions hold
///   identities here: the same function).
/// Files written before these names (backbone directly under `extractor.`, Linear layers at
/// `projection.0, 2, 4, ...`) still load: upgrade_names() renames them.
/// A frozen backbone has requires_grad = false and stays in eval mode (its BatchNorm statistics
/// do not move) even when the model is put in train mode. The model starts unfrozen; its args
/// only ask for freezing (requested_freezing), and the training loop sets the state at the
/// start of every epoch.
class ExtractorWithMLPImpl : public Extractor, public io::LegacyNames {
 public:
  ExtractorWithMLPImpl(std::shared_ptr<Extractor> backbone, ExtractorWithMLPOptions options = {});

  torch::Tensor forward(torch::Tensor images) override;
  int64_t feat_dim() const override;
  ExtractorInput input() const override { return backbone_->input(); }
  void train(bool on = true) override;

  bool freezable() const override { return true; }
  void set_backbone_frozen(bool frozen) override;
  /// `train_backbone: false` -> every epoch; otherwise the first `freeze_n_epochs`.
  BackboneFreezing requested_freezing() const override;
  bool backbone_frozen() const { return frozen_; }
  Extractor& backbone() { return *backbone_; }
  const Extractor& backbone() const { return *backbone_; }

  /// `weights` with the names of files written before this class used OML's names renamed to
  /// the current ones; other names unchanged. io::load_state_dict calls it (LegacyNames).
  io::StateDict upgrade_names(io::StateDict weights) const override;

 private:
  ExtractorWithMLPOptions options_;
  std::shared_ptr<Extractor> backbone_;
  torch::nn::Sequential projection_{nullptr};
  bool frozen_ = false;
};
TORCH_MODULE(ExtractorWithMLP);

}  // namespace oml::models
