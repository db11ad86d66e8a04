#pragma once
// CLIP's image tower as OML's ViTCLIPExtractor wraps it: OpenAI's VisionTransformer (ViT-B/16,
// ViT-B/32, ViT-L/14, ViT-L/14@336px). Parameters carry CLIP's own names at the module's top
// level (`conv1.weight`, `class_embedding`, `positional_embedding`, `ln_pre.weight`,
// `transformer.resblocks.3.attn.in_proj_weight`, `transformer.resblocks.3.mlp.c_fc.bias`,
// `ln_post.bias`, `proj`), so that OML's checkpoints and CLIP state dicts load without renaming
// and an oml-cpp checkpoint loads into OML's model (docs/models.md#vit_clip).

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>
#include <vector>

#include "oml/models/dense.h"
#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: vit_clip, args: {arch: vitb16_224, weights: openai_vitb16_224}}`
struct ViTClipOptions {
  std::string arch;                ///< required, see vit_clip_arch_names()
  std::string weights;             ///< file, zoo name (docs/models.md#zoo-weights-by-name), "" = random
  bool normalise_features = true;  ///< OML's default: divide embeddings by their (detached) L2 norm
};

/// config::ArgumentError for a missing or unknown arch, or a zoo name for another arch; reads no
/// file.
void check_options(const ViTClipOptions& options);

/// The numbers of one of CLIP's image towers, as OML's constructors (vitb16_224, ...) pass them.
struct ViTClipArch {
  std::string name;
  int64_t width = 768;  ///< token size
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t patch_size = 16;
  int64_t input_resolution = 224;  ///< the only image size the model takes
  int64_t output_dim = 512;        ///< columns of `proj`: the embedding size
};

/// vitb16_224 vitb32_224 vitl14_224 vitl14_336.
const std::vector<std::string>& vit_clip_arch_names();
/// config::ArgumentError (key `arch`) listing the known names when `name` is not one.
ViTClipArch vit_clip_arch(const std::string& name);

/// CLIP's ResidualAttentionBlock: x + attn(ln_1(x)), then x + mlp(ln_2(x)) with QuickGELU
/// (x * sigmoid(1.702 x)) between `mlp.c_fc` and `mlp.c_proj`. `attn` has the parameters of
/// torch.nn.MultiheadAttention: `in_proj_weight`, `in_proj_bias`, `out_proj.{weight,bias}`.
class ClipResidualBlockImpl : public torch::nn::Module {
 public:
  ClipResidualBlockImpl(int64_t width, int64_t heads);
  /// `x` batch first: [B, tokens, width].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t heads_;
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  torch::Tensor in_proj_weight_, in_proj_bias_;
  Dense out_proj_{nullptr}, c_fc_{nullptr}, c_proj_{nullptr};
};
TORCH_MODULE(ClipResidualBlock);

class ViTClipImpl : public Extractor, public OmlWeightsReader {
 public:
  explicit ViTClipImpl(ViTClipOptions options);

  /// `images` [B, 3, R, R] with R the arch's input resolution -> ln_post(class token) @ proj,
  /// [B, output_dim], normalised as configured. DataError for another image size.
  torch::Tensor forward(torch::Tensor images) override;
  int64_t feat_dim() const override { return arch_.output_dim; }
  std::string oml_module_attribute() const override { return "visual"; }  // ViTCLIPExtractor.visual

  /// Loads `weights` (a file or a zoo name) as OML's ViTCLIPExtractor does: a TorchScript archive
  /// (OpenAI's CLIP files: the `visual` submodule's tensors), or a torch.save file — a CLIP state
  /// dict (the image tower's entries found by `visual.` in their names, the text tower's dropped),
  /// an OML/Lightning .ckpt or an oml-cpp checkpoint; entries the model does not have are dropped,
  /// every entry it has must be there with its shape. DataError naming the file otherwise.
  void load_weights(const std::string& weights) override;

  const ViTClipOptions& options() const { return options_; }
  const ViTClipArch& arch() const { return arch_; }

 private:
  ViTClipOptions options_;
  ViTClipArch arch_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::Tensor class_embedding_, positional_embedding_, proj_;
  torch::nn::LayerNorm ln_pre_{nullptr}, ln_post_{nullptr};
  torch::nn::ModuleList resblocks_{nullptr};
};
TORCH_MODULE(ViTClip);

}  // namespace oml::models
