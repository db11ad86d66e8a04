#include "oml/models/vit_clip.h"

#include <torch/torch.h>

#include <cmath>

#include "attention.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/io/torchscript.h"
#include "oml/models/zoo.h"

namespace oml::models {
namespace {

namespace nn = torch::nn;

ViTClipArch clip(const std::string& name, int64_t width, int64_t layers, int64_t heads, int64_t patch,
                 int64_t resolution, int64_t output_dim) {
  ViTClipArch a;
  a.name = name;
  a.width = width;
  a.layers = layers;
  a.heads = heads;
  a.patch_size = patch;
  a.input_resolution = resolution;
  a.output_dim = output_dim;
  return a;
}

// OML's ViTCLIPExtractor.constructors.
const std::vector<ViTClipArch>& clip_archs() {
  static const std::vector<ViTClipArch> all = {
      clip("vitb16_224", 768, 12, 12, 16, 224, 512),
      clip("vitb32_224", 768, 12, 12, 32, 224, 512),
      clip("vitl14_224", 1024, 24, 16, 14, 224, 768),
      clip("vitl14_336", 1024, 24, 16, 14, 336, 768),
  };
  return all;
}

// CLIP's LayerNorm subclass: computed in float32 whatever the input's dtype, returned in it.
torch::Tensor layer_norm(nn::LayerNorm& norm, const torch::Tensor& x) {
  return norm(x.to(torch::kFloat)).to(x.scalar_type());
}

// The arch a weights file was made for, from the shapes it holds ("" when not recognisable).
std::string guess_clip_arch(const io::StateDict& weights) {
  const auto conv = weights.find("conv1.weight");
  const auto pos = weights.find("positional_embedding");
  const auto proj = weights.find("proj");
  if (conv == weights.end() || pos == weights.end() || proj == weights.end() || conv->second.dim() != 4 ||
      proj->second.dim() != 2) {
    return "";
  }
  int64_t layers = 0;
  while (weights.count("transformer.resblocks." + std::to_string(layers) + ".ln_1.weight")) ++layers;
  for (const auto& a : clip_archs()) {
    const int64_t grid = a.input_resolution / a.patch_size;
    if (a.width == conv->second.size(0) && a.patch_size == conv->second.size(2) && a.layers == layers &&
        pos->second.size(0) == grid * grid + 1 && a.output_dim == proj->second.size(1)) {
      return a.name;
    }
  }
  return "";
}

// OML's take_visual_part_of_vit_clip: an entry with `visual` in its name is renamed to what
// follows `visual.` and replaces an entry of that name (a whole CLIP model's text tower has
// `transformer.*` and `positional_embedding` too); then only the model's names are kept.
io::StateDict visual_part(const io::StateDict& weights, const io::StateDict& model) {
  io::StateDict renamed;
  for (const auto& [name, tensor] : weights) {
    if (name.find("visual") == std::string::npos) renamed.emplace(name, tensor);
  }
  for (const auto& [name, tensor] : weights) {
    const auto at = name.find("visual");
    if (at != std::string::npos) renamed.insert_or_assign(name.substr(std::min(name.size(), at + 7)), tensor);
  }
  io::StateDict kept;
  for (const auto& [name, tensor] : renamed) {
    if (model.count(name)) kept.emplace(name, tensor);
  }
  // Nothing of the model's under these names (another prefix, another model): the generic
  // loader's prefix search and its full report of what does not fit.
  return kept.empty() ? renamed : kept;
}

}  // namespace

const std::vector<std::string>& vit_clip_arch_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& a : clip_archs()) out.push_back(a.name);
    return out;
  }();
  return names;
}

ViTClipArch vit_clip_arch(const std::string& name) {
  for (const auto& a : clip_archs()) {
    if (a.name == name) return a;
  }
  config::fail_argument("extractor 'vit_clip'", "arch", "unknown arch '", name, "'",
                        did_you_mean(name, vit_clip_arch_names()), "; expected one of ",
                        join(vit_clip_arch_names()));
}

void check_options(const ViTClipOptions& o) {
  (void)vit_clip_arch(o.arch);
  check_zoo_weights(o.weights, "vit_clip", o.arch);
}

ClipResidualBlockImpl::ClipResidualBlockImpl(int64_t width, int64_t heads) : heads_(heads) {
  // Registered in CLIP's order (attn, ln_1, mlp, ln_2); names as torch.nn.MultiheadAttention's.
  auto attn = register_module("attn", std::make_shared<nn::Module>("MultiheadAttention"));
  in_proj_weight_ = attn->register_parameter("in_proj_weight", torch::empty({3 * width, width}));
  in_proj_bias_ = attn->register_parameter("in_proj_bias", torch::zeros({3 * width}));
  out_proj_ = attn->register_module("out_proj", Dense(width, width));
  ln_1_ = register_module("ln_1", nn::LayerNorm(nn::LayerNormOptions({width})));
  auto mlp = register_module("mlp", std::make_shared<nn::Module>("Sequential"));
  c_fc_ = mlp->register_module("c_fc", Dense(width, 4 * width));
  c_proj_ = mlp->register_module("c_proj", Dense(4 * width, width));
  ln_2_ = register_module("ln_2", nn::LayerNorm(nn::LayerNormOptions({width})));
  // torch.nn.MultiheadAttention's initialisation: Xavier-uniform input projections, zero biases.
  torch::NoGradGuard no_grad;
  nn::init::xavier_uniform_(in_proj_weight_);
  out_proj_->bias.zero_();
}

torch::Tensor ClipResidualBlockImpl::forward(const torch::Tensor& x) {
  const auto normed = layer_norm(ln_1_, x);
  auto y = x + detail::self_attention(normed, in_proj_weight_, in_proj_bias_, out_proj_->weight,
                                      out_proj_->bias, heads_);
  auto h = c_fc_(layer_norm(ln_2_, y));
  h = h * torch::sigmoid(1.702 * h);  // QuickGELU
  return y + c_proj_(h);
}

ViTClipImpl::ViTClipImpl(ViTClipOptions options)
    : options_(std::move(options)), arch_(vit_clip_arch(options_.arch)) {
  const int64_t width = arch_.width;
  const int64_t grid = arch_.input_resolution / arch_.patch_size;
  conv1_ = register_module(
      "conv1",
      nn::Conv2d(nn::Conv2dOptions(3, width, arch_.patch_size).stride(arch_.patch_size).bias(false)));
  // CLIP's initialisation: class and position embeddings and the projection ~ N(0, width^-1/2).
  const double scale = 1.0 / std::sqrt(static_cast<double>(width));
  class_embedding_ = register_parameter("class_embedding", scale * torch::randn({width}));
  positional_embedding_ =
      register_parameter("positional_embedding", scale * torch::randn({grid * grid + 1, width}));
  ln_pre_ = register_module("ln_pre", nn::LayerNorm(nn::LayerNormOptions({width})));
  auto transformer = register_module("transformer", std::make_shared<nn::Module>("Transformer"));
  resblocks_ = transformer->register_module("resblocks", nn::ModuleList());
  for (int64_t i = 0; i < arch_.layers; ++i) resblocks_->push_back(ClipResidualBlock(width, arch_.heads));
  ln_post_ = register_module("ln_post", nn::LayerNorm(nn::LayerNormOptions({width})));
  proj_ = register_parameter("proj", scale * torch::randn({width, arch_.output_dim}));

  if (!options_.weights.empty()) load_weights(options_.weights);
}

void ViTClipImpl::load_weights(const std::string& weights) {
  const std::string path = resolve_weights(weights, "vit_clip", arch_.name);
  io::StateDict file;
  if (io::is_torchscript_archive(path)) {
    // OpenAI's CLIP files: the image tower is the TorchScript module's `visual` (in float16 there;
    // the copy into the model converts).
    file = io::read_torchscript_state_dict(path, "visual");
  } else {
    file = io::find_state_dict(io::read_torch_file(path), path);
    // As OML: criterion, text tower and other entries the model lacks are dropped.
    file = visual_part(file, io::state_dict(*this));
  }
  try {
    io::load_state_dict(*this, file, path);
  } catch (DataError& e) {
    const std::string file_arch = guess_clip_arch(file);
    if (!file_arch.empty() && file_arch != arch_.name) {
      e.add_context("the file holds " + file_arch + " weights, the model is arch " + arch_.name);
    }
    throw;
  }
}

torch::Tensor ViTClipImpl::forward(torch::Tensor images) {
  const int64_t size = arch_.input_resolution;
  OML_CHECK(images.dim() == 4 && images.size(1) == 3, DataError, "vit_clip expects images [B, 3, H, W], got ",
            images.sizes());
  // As OML: CLIP's position embedding is for one grid, used as it is.
  OML_CHECK(images.size(2) == size && images.size(3) == size, DataError, "vit_clip ", arch_.name,
            " takes images of ", size, "x", size, " px, got ", images.size(2), "x", images.size(3),
            " (resize them to ", size, ", e.g. transforms norm_resize_albu_clip with im_size: ", size, ")");
  auto x = conv1_(images).flatten(2).transpose(1, 2);  // [B, grid^2, width]
  const int64_t batch = x.size(0);
  const auto cls = class_embedding_.to(x.scalar_type()).reshape({1, 1, -1}).expand({batch, 1, -1});
  x = torch::cat({cls, x}, 1) + positional_embedding_.to(x.scalar_type());
  x = layer_norm(ln_pre_, x);
  // CLIP runs its transformer sequence first ([tokens, B, width]); every operation here is per
  // token or attends within one image, so batch first is the same computation.
  for (const auto& block : *resblocks_) x = block->as<ClipResidualBlock>()->forward(x);
  auto out = torch::matmul(layer_norm(ln_post_, x.select(1, 0)), proj_);
  return options_.normalise_features ? normalise_detached(out) : out;
}

}  // namespace oml::models
