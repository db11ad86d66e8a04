#pragma once
// UNICOM's vision transformers as OML's ViTUnicomExtractor wraps them (ViT-B/32, ViT-B/16,
// ViT-L/14, ViT-L/14@336px): no class token; every patch token after the final norm, flattened,
// goes through `feature` (Linear, BatchNorm1d, Linear, BatchNorm1d). Parameters and buffers carry
// UNICOM's names at the module's top level (`patch_embed.proj.weight`, `pos_embed`,
// `blocks.3.attn.qkv.weight`, `blocks.3.mlp.fc1.bias`, `norm.bias`, `feature.1.running_var`, ...),
// so that UNICOM's files and OML's checkpoints load without renaming (docs/models.md#vit_unicom).

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>
#include <vector>

#include "oml/models/dense.h"
#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: vit_unicom, args: {arch: vitb32_unicom, weights: vitb32_unicom}}`
struct ViTUnicomOptions {
  std::string arch;                 ///< required, see vit_unicom_arch_names()
  std::string weights;              ///< file, zoo name (docs/models.md#zoo-weights-by-name), "" = random
  bool normalise_features = false;  ///< required, as in OML: divide embeddings by their (detached) L2 norm
  /// OML's gradient checkpointing switch: it trades compute for memory and changes no value;
  /// oml-cpp keeps every activation, so it is accepted and has no effect.
  bool use_gradient_ckpt = true;
};

/// config::ArgumentError for a missing or unknown arch, or a zoo name for another arch; reads no
/// file.
void check_options(const ViTUnicomOptions& options);

/// The numbers of UNICOM's build_model for one arch.
struct ViTUnicomArch {
  std::string name;
  int64_t input_size = 224;  ///< the only image size the model takes
  int64_t patch_size = 32;
  int64_t dim = 768;
  int64_t embedding_size = 512;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double drop_path_rate = 0.1;  ///< stochastic depth in training, rising linearly over the blocks
};

/// vitb32_unicom vitb16_unicom vitl14_unicom vitl14_336px_unicom.
const std::vector<std::string>& vit_unicom_arch_names();
/// config::ArgumentError (key `arch`) listing the known names when `name` is not one.
ViTUnicomArch vit_unicom_arch(const std::string& name);

/// UNICOM's Block: x + drop_path(attn(norm1(x))), then x + drop_path(mlp(norm2(x))); the
/// attention's `qkv` has no bias, the MLP (`fc1`, ReLU6, `fc2`) is 4x wide. In training each
/// branch is dropped per sample with probability `drop_path` (survivors scaled by 1 / keep).
class UnicomBlockImpl : public torch::nn::Module {
 public:
  UnicomBlockImpl(int64_t dim, int64_t num_heads, double drop_path);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor drop_path(const torch::Tensor& branch) const;

  int64_t num_heads_;
  double drop_path_;
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  Dense qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(UnicomBlock);

class ViTUnicomImpl : public Extractor, public OmlWeightsReader {
 public:
  explicit ViTUnicomImpl(ViTUnicomOptions options);

  /// `images` [B, 3, S, S] with S the arch's input size -> [B, embedding_size], normalised as
  /// configured. DataError for another image size. In training BatchNorm needs B > 1.
  torch::Tensor forward(torch::Tensor images) override;
  int64_t feat_dim() const override { return arch_.embedding_size; }
  std::string oml_module_attribute() const override { return "model"; }  // ViTUnicomExtractor.model

  /// Loads `weights` (a file or a zoo name) as OML's ViTUnicomExtractor does: UNICOM's published
  /// state dict (float16), an OML/Lightning .ckpt (backbone found by its `norm.bias`, the rest
  /// dropped) or an oml-cpp checkpoint; strict. DataError naming the file on any mismatch.
  void load_weights(const std::string& weights) override;

  const ViTUnicomOptions& options() const { return options_; }
  const ViTUnicomArch& arch() const { return arch_; }

 private:
  ViTUnicomOptions options_;
  ViTUnicomArch arch_;
  torch::nn::Conv2d patch_proj_{nullptr};
  torch::Tensor pos_embed_;
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear feature0_{nullptr}, feature2_{nullptr};
  torch::nn::BatchNorm1d feature1_{nullptr}, feature3_{nullptr};
};
TORCH_MODULE(ViTUnicom);

}  // namespace oml::models
