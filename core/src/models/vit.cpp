#include "oml/models/vit.h"

#include <torch/torch.h>

#include <cmath>

#include "attention.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/zoo.h"
#include "weight_init.h"

namespace oml::models {
namespace {

namespace nn = torch::nn;

constexpr double kLayerNormEps = 1e-6;  // DINO and DINOv2 both use LayerNorm(eps=1e-6)

ViTArch dino(const std::string& name, int64_t dim, int64_t heads, int64_t patch) {
  ViTArch a;
  a.name = name;
  a.embed_dim = dim;
  a.num_heads = heads;
  a.patch_size = patch;
  return a;
}

// DINOv2's hub models: 518 px pre-training (37 x 37 patches of 14 px), LayerScale initialised to
// 1; the `_reg` ones add 4 register tokens and interpolate without offset, antialiased.
ViTArch dinov2(const std::string& name, int64_t dim, int64_t depth, int64_t heads, bool registers) {
  ViTArch a = dino(name, dim, heads, 14);
  a.depth = depth;
  a.img_size = 518;
  a.dinov2 = true;
  if (registers) {
    a.num_register_tokens = 4;
    a.interpolate_offset = 0.0;
    a.interpolate_antialias = true;
  }
  return a;
}

const std::vector<ViTArch>& archs() {
  static const std::vector<ViTArch> all = {
      dino("vits8", 384, 6, 8),
      dino("vits16", 384, 6, 16),
      dino("vitb8", 768, 12, 8),
      dino("vitb16", 768, 12, 16),
      dinov2("vits14", 384, 12, 6, false),
      dinov2("vitb14", 768, 12, 12, false),
      dinov2("vitl14", 1024, 24, 16, false),
      dinov2("vits14_reg", 384, 12, 6, true),
      dinov2("vitb14_reg", 768, 12, 12, true),
      dinov2("vitl14_reg", 1024, 24, 16, true),
  };
  return all;
}

// The arch a weights file was made for, from the shapes it holds ("" when not recognisable).
std::string guess_arch(const io::StateDict& weights) {
  const auto proj = weights.find("patch_embed.proj.weight");
  if (proj == weights.end() || proj->second.dim() != 4) return "";
  const int64_t dim = proj->second.size(0);
  const int64_t patch = proj->second.size(2);
  const bool dinov2 = weights.count("mask_token") > 0;
  const bool registers = weights.count("register_tokens") > 0;
  int64_t depth = 0;
  while (weights.count("blocks." + std::to_string(depth) + ".norm1.weight")) ++depth;
  for (const auto& a : archs()) {
    if (a.embed_dim == dim && a.patch_size == patch && a.dinov2 == dinov2 && a.depth == depth &&
        (a.num_register_tokens > 0) == registers) {
      return a.name;
    }
  }
  return "";
}

}  // namespace

const std::vector<std::string>& vit_arch_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& a : archs()) out.push_back(a.name);
    return out;
  }();
  return names;
}

ViTArch vit_arch(const std::string& name) {
  for (const auto& a : archs()) {
    if (a.name == name) return a;
  }
  config::fail_argument("extractor 'vit'", "arch", "unknown arch '", name, "'",
                        did_you_mean(name, vit_arch_names()), "; expected one of ", join(vit_arch_names()));
}

void check_options(const ViTOptions& o) {
  (void)vit_arch(o.arch);
  check_zoo_weights(o.weights, "vit", o.arch);
}

ViTBlockImpl::ViTBlockImpl(int64_t dim, int64_t num_heads, bool layer_scale) : num_heads_(num_heads) {
  norm1_ = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kLayerNormEps)));
  // Submodules named as DINO's: attn.{qkv,proj}, mlp.{fc1,fc2}.
  auto attn = register_module("attn", std::make_shared<nn::Module>("Attention"));
  qkv_ = attn->register_module("qkv", Dense(dim, 3 * dim));
  proj_ = attn->register_module("proj", Dense(dim, dim));
  if (layer_scale) {
    auto ls1 = register_module("ls1", std::make_shared<nn::Module>("LayerScale"));
    gamma1_ = ls1->register_parameter("gamma", torch::ones({dim}));
  }
  norm2_ = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kLayerNormEps)));
  auto mlp = register_module("mlp", std::make_shared<nn::Module>("Mlp"));
  fc1_ = mlp->register_module("fc1", Dense(dim, 4 * dim));
  fc2_ = mlp->register_module("fc2", Dense(4 * dim, dim));
  if (layer_scale) {
    auto ls2 = register_module("ls2", std::make_shared<nn::Module>("LayerScale"));
    gamma2_ = ls2->register_parameter("gamma", torch::ones({dim}));
  }
}

torch::Tensor ViTBlockImpl::attention(const torch::Tensor& x) {
  return detail::self_attention(x, qkv_->weight, qkv_->bias, proj_->weight, proj_->bias, num_heads_);
}

torch::Tensor ViTBlockImpl::forward(const torch::Tensor& x) {
  auto a = attention(norm1_(x));
  if (gamma1_.defined()) a = a * gamma1_;
  auto y = x + a;
  auto m = fc2_(torch::gelu(fc1_(norm2_(y))));
  if (gamma2_.defined()) m = m * gamma2_;
  return y + m;
}

ViTImpl::ViTImpl(ViTOptions options) : options_(std::move(options)), arch_(vit_arch(options_.arch)) {
  const int64_t dim = arch_.embed_dim;
  const int64_t grid = arch_.img_size / arch_.patch_size;
  auto patch_embed = register_module("patch_embed", std::make_shared<nn::Module>("PatchEmbed"));
  patch_proj_ = patch_embed->register_module(
      "proj", nn::Conv2d(nn::Conv2dOptions(3, dim, arch_.patch_size).stride(arch_.patch_size)));
  cls_token_ = register_parameter("cls_token", torch::zeros({1, 1, dim}));
  pos_embed_ = register_parameter("pos_embed", torch::zeros({1, grid * grid + 1, dim}));
  if (arch_.num_register_tokens > 0) {
    register_tokens_ =
        register_parameter("register_tokens", torch::zeros({1, arch_.num_register_tokens, dim}));
  }
  blocks_ = register_module("blocks", nn::ModuleList());
  for (int64_t i = 0; i < arch_.depth; ++i) blocks_->push_back(ViTBlock(dim, arch_.num_heads, arch_.dinov2));
  norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kLayerNormEps)));
  // DINOv2 keeps the token it substitutes for masked patches in pre-training (unused here).
  if (arch_.dinov2) mask_token_ = register_parameter("mask_token", torch::zeros({1, dim}));

  {
    // The original initialisation: truncated normal(0.02) for the position embedding and every
    // linear weight, zero biases; DINO draws the CLS token like pos_embed, DINOv2 with std 1e-6.
    torch::NoGradGuard no_grad;
    detail::trunc_normal(pos_embed_, 0.02);
    if (arch_.dinov2) {
      cls_token_.normal_(0.0, 1e-6);
      if (register_tokens_.defined()) register_tokens_.normal_(0.0, 1e-6);
    } else {
      detail::trunc_normal(cls_token_, 0.02);
    }
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        detail::trunc_normal(linear->weight, 0.02);
        linear->bias.zero_();
      }
    }
  }

  if (!options_.weights.empty()) load_weights(options_.weights);
}

void ViTImpl::load_weights(const std::string& weights) {
  const std::string path = resolve_weights(weights, "vit", arch_.name);
  const auto content = io::read_torch_file(path);
  // As OML: the backbone is what precedes `norm.bias`; criterion and other entries are dropped.
  const auto backbone = io::select_backbone(io::find_state_dict(content, path), "norm.bias", path);
  try {
    io::load_state_dict(*this, backbone, path);
  } catch (DataError& e) {
    const std::string file_arch = guess_arch(backbone);
    if (!file_arch.empty() && file_arch != arch_.name) {
      e.add_context("the file holds " + file_arch + " weights, the model is arch " + arch_.name);
    }
    throw;
  }
}

torch::Tensor ViTImpl::position_embedding(int64_t n_patches, int64_t height, int64_t width) const {
  const int64_t n_pretrained = pos_embed_.size(1) - 1;
  if (n_patches == n_pretrained && height == width) return pos_embed_;
  const int64_t dim = pos_embed_.size(2);
  const auto pos = pos_embed_.to(torch::kFloat);
  const auto cls_pos = pos.slice(1, 0, 1);
  const int64_t grid = static_cast<int64_t>(std::sqrt(static_cast<double>(n_pretrained)));
  const auto patch_pos = pos.slice(1, 1).reshape({1, grid, grid, dim}).permute({0, 3, 1, 2});
  const int64_t rows = height / arch_.patch_size, cols = width / arch_.patch_size;
  torch::Tensor resized;
  if (arch_.interpolate_offset != 0.0) {
    // Bicubic by scale factor (the offset avoids an off-by-one output size from rounding).
    const std::vector<double> scales = {
        (static_cast<double>(rows) + arch_.interpolate_offset) / std::sqrt(n_pretrained),
        (static_cast<double>(cols) + arch_.interpolate_offset) / std::sqrt(n_pretrained)};
    resized = arch_.interpolate_antialias ? at::_upsample_bicubic2d_aa(patch_pos, c10::nullopt, false, scales)
                                          : at::upsample_bicubic2d(patch_pos, c10::nullopt, false, scales);
  } else {
    const std::vector<int64_t> size = {rows, cols};
    const c10::optional<at::ArrayRef<double>> no_scales;
    resized = arch_.interpolate_antialias ? at::_upsample_bicubic2d_aa(patch_pos, size, false, no_scales)
                                          : at::upsample_bicubic2d(patch_pos, size, false, no_scales);
  }
  OML_ASSERT(resized.size(2) == rows && resized.size(3) == cols, "vit: position grid ", resized.sizes(),
             " for ", rows, "x", cols, " patches");
  const auto flat = resized.permute({0, 2, 3, 1}).reshape({1, rows * cols, dim});
  return torch::cat({cls_pos, flat}, 1).to(pos_embed_.scalar_type());
}

torch::Tensor ViTImpl::cls_features(const torch::Tensor& images) {
  OML_CHECK(images.dim() == 4 && images.size(1) == 3, DataError, "vit expects images [B, 3, H, W], got ",
            images.sizes());
  const int64_t height = images.size(2), width = images.size(3), patch = arch_.patch_size;
  OML_CHECK(height >= patch && width >= patch, DataError, "vit ", arch_.name, ": images of ", height, "x",
            width, " px are smaller than one ", patch, " px patch");
  // DINOv2 refuses sizes that are not a multiple of the patch; DINO drops the remainder.
  OML_CHECK(!arch_.dinov2 || (height % patch == 0 && width % patch == 0), DataError, "vit ", arch_.name,
            ": image size ", height, "x", width, " px is not a multiple of the patch size ", patch,
            " (resize to e.g. ", (height / patch) * patch, "x", (width / patch) * patch, ")");
  auto x = patch_proj_(images).flatten(2).transpose(1, 2);  // [B, patches, dim]
  const int64_t batch = x.size(0);
  x = torch::cat({cls_token_.expand({batch, -1, -1}), x}, 1);
  x = x + position_embedding(x.size(1) - 1, height, width);
  if (register_tokens_.defined()) {
    x = torch::cat({x.slice(1, 0, 1), register_tokens_.expand({batch, -1, -1}), x.slice(1, 1)}, 1);
  }
  for (const auto& block : *blocks_) x = block->as<ViTBlock>()->forward(x);
  return norm_(x).select(1, 0);
}

torch::Tensor ViTImpl::forward(torch::Tensor images) {
  torch::Tensor out;
  if (options_.use_multi_scale) {
    // DINO's multi-scale evaluation as OML runs it: the mean of the CLS features at 3 scales
    // (bilinear resizing by scale factor).
    out = torch::zeros({images.size(0), feat_dim()}, images.options());
    for (const double scale : {1.0, 1.0 / std::sqrt(2.0), 0.5}) {
      if (scale == 1.0) {
        out = out + cls_features(images);
      } else {
        const std::vector<double> factors = {scale, scale};
        out = out + cls_features(at::upsample_bilinear2d(images, c10::nullopt, false, factors));
      }
    }
    out = out / 3.0;
  } else {
    out = cls_features(images);
  }
  return options_.normalise_features ? normalise_detached(out) : out;
}

}  // namespace oml::models
