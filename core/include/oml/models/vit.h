#pragma once
// Vision transformers as OML's ViTExtractor builds them: the official DINO (vits8, vits16, vitb8,
// vitb16) and DINOv2 (vits14, vitb14, vitl14 and their `_reg` variants with 4 register tokens)
// networks. Parameters sit at the module's top level under DINO's / DINOv2's own names
// (`cls_token`, `pos_embed`, `patch_embed.proj.weight`, `blocks.3.attn.qkv.bias`,
// `blocks.3.ls1.gamma`, `register_tokens`, `mask_token`, `norm.bias`, ...), so that a published
// state dict loads without renaming and an oml-cpp checkpoint loads into OML with strict=True.

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>
#include <vector>

#include "oml/models/dense.h"
#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: vit, args: {arch: vits16, weights: vits16_dino, normalise_features: false}}`
struct ViTOptions {
  std::string arch = "vits16";      ///< see vit_arch_names()
  std::string weights;              ///< file, zoo name (docs/models.md#zoo-weights-by-name), "" = random
  bool normalise_features = false;  ///< divide embeddings by their (detached) L2 norm
  bool use_multi_scale = false;     ///< mean of the embeddings at scales 1, 1/sqrt(2), 1/2
};

/// config::ArgumentError for an unknown arch or a zoo name for another arch; reads no file.
void check_options(const ViTOptions& options);

/// The numbers that make an arch: what DINO's vit_small/vit_base and DINOv2's
/// vit_small/vit_base/vit_large with their hub settings use.
struct ViTArch {
  std::string name;
  int64_t embed_dim = 384;
  int64_t depth = 12;
  int64_t num_heads = 6;
  int64_t patch_size = 16;
  int64_t img_size = 224;  ///< pre-training size: pos_embed holds (img_size / patch_size)^2 + 1 rows
  bool dinov2 = false;     ///< LayerScale (ls1, ls2), mask_token, DINOv2's interpolation
  int64_t num_register_tokens = 0;
  /// Position-embedding interpolation: with an offset, bicubic by scale factor (grid + offset) /
  /// pre-training grid; without one (the `_reg` models), bicubic to the exact grid, antialiased.
  double interpolate_offset = 0.1;
  bool interpolate_antialias = false;
};

/// vits8 vits16 vitb8 vitb16 vits14 vitb14 vitl14 vits14_reg vitb14_reg vitl14_reg.
const std::vector<std::string>& vit_arch_names();
/// config::ArgumentError (key `arch`) listing the known names when `name` is not one.
ViTArch vit_arch(const std::string& name);

/// One transformer block. DINO: x + attn(norm1(x)), then x + mlp(norm2(x)); DINOv2 scales each
/// branch by a learned per-channel gamma (ls1, ls2) first.
class ViTBlockImpl : public torch::nn::Module {
 public:
  ViTBlockImpl(int64_t dim, int64_t num_heads, bool layer_scale);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor attention(const torch::Tensor& x);

  int64_t num_heads_;
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  Dense qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
  torch::Tensor gamma1_, gamma2_;  ///< undefined without LayerScale
};
TORCH_MODULE(ViTBlock);

class ViTImpl : public Extractor, public OmlWeightsReader {
 public:
  explicit ViTImpl(ViTOptions options = {});

  /// CLS token after the final norm ([B, embed_dim]), multi-scale and normalised as configured.
  torch::Tensor forward(torch::Tensor images) override;
  /// The network alone at one scale: CLS token after the final norm.
  torch::Tensor cls_features(const torch::Tensor& images);
  int64_t feat_dim() const override { return arch_.embed_dim; }
  std::string oml_module_attribute() const override { return "model"; }  // ViTExtractor.model

  /// Loads `weights` (a file or a zoo name) as OML's ViTExtractor does: a published DINO/DINOv2
  /// state dict, an OML/Lightning .ckpt (backbone found by its `norm.bias`, the rest dropped) or
  /// an oml-cpp checkpoint; strict. DataError naming the file on any mismatch.
  void load_weights(const std::string& weights) override;

  const ViTOptions& options() const { return options_; }
  const ViTArch& arch() const { return arch_; }

 private:
  torch::Tensor position_embedding(int64_t n_patches, int64_t height, int64_t width) const;

  ViTOptions options_;
  ViTArch arch_;
  torch::nn::Conv2d patch_proj_{nullptr};
  torch::Tensor cls_token_, pos_embed_, register_tokens_, mask_token_;
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
};
TORCH_MODULE(ViT);

}  // namespace oml::models
