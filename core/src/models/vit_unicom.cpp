#include "oml/models/vit_unicom.h"

#include <torch/torch.h>

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

constexpr double kFeatureBatchNormEps = 2e-5;  // UNICOM's BatchNorm1d(eps=2e-5) in `feature`

ViTUnicomArch unicom(const std::string& name, int64_t size, int64_t patch, int64_t dim, int64_t embedding,
                     int64_t depth, int64_t heads) {
  ViTUnicomArch a;
  a.name = name;
  a.input_size = size;
  a.patch_size = patch;
  a.dim = dim;
  a.embedding_size = embedding;
  a.depth = depth;
  a.num_heads = heads;
  return a;
}

// OML's ViTUnicomExtractor.constructors, i.e. UNICOM's build_model.
const std::vector<ViTUnicomArch>& unicom_archs() {
  static const std::vector<ViTUnicomArch> all = {
      unicom("vitb32_unicom", 224, 32, 768, 512, 12, 12),
      unicom("vitb16_unicom", 224, 16, 768, 768, 12, 12),
      unicom("vitl14_unicom", 224, 14, 1024, 768, 24, 16),
      unicom("vitl14_336px_unicom", 336, 14, 1024, 768, 24, 16),
  };
  return all;
}

// The arch a weights file was made for, from the shapes it holds ("" when not recognisable).
std::string guess_unicom_arch(const io::StateDict& weights) {
  const auto proj = weights.find("patch_embed.proj.weight");
  const auto pos = weights.find("pos_embed");
  if (proj == weights.end() || pos == weights.end() || proj->second.dim() != 4 || pos->second.dim() != 3)
    return "";
  int64_t depth = 0;
  while (weights.count("blocks." + std::to_string(depth) + ".norm1.weight")) ++depth;
  for (const auto& a : unicom_archs()) {
    const int64_t grid = a.input_size / a.patch_size;
    if (a.dim == proj->second.size(0) && a.patch_size == proj->second.size(2) && a.depth == depth &&
        pos->second.size(1) == grid * grid) {
      return a.name;
    }
  }
  return "";
}

}  // namespace

const std::vector<std::string>& vit_unicom_arch_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& a : unicom_archs()) out.push_back(a.name);
    return out;
  }();
  return names;
}

ViTUnicomArch vit_unicom_arch(const std::string& name) {
  for (const auto& a : unicom_archs()) {
    if (a.name == name) return a;
  }
  config::fail_argument("extractor 'vit_unicom'", "arch", "unknown arch '", name, "'",
                        did_you_mean(name, vit_unicom_arch_names()), "; expected one of ",
                        join(vit_unicom_arch_names()));
}

void check_options(const ViTUnicomOptions& o) {
  (void)vit_unicom_arch(o.arch);
  check_zoo_weights(o.weights, "vit_unicom", o.arch);
}

UnicomBlockImpl::UnicomBlockImpl(int64_t dim, int64_t num_heads, double drop_path)
    : num_heads_(num_heads), drop_path_(drop_path) {
  norm1_ = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({dim})));
  norm2_ = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({dim})));
  auto attn = register_module("attn", std::make_shared<nn::Module>("Attention"));
  qkv_ = attn->register_module("qkv", Dense(nn::LinearOptions(dim, 3 * dim).bias(false)));
  proj_ = attn->register_module("proj", Dense(dim, dim));
  auto mlp = register_module("mlp", std::make_shared<nn::Module>("Mlp"));
  fc1_ = mlp->register_module("fc1", Dense(dim, 4 * dim));
  fc2_ = mlp->register_module("fc2", Dense(4 * dim, dim));
}

torch::Tensor UnicomBlockImpl::drop_path(const torch::Tensor& branch) const {
  if (!is_training() || drop_path_ == 0.0) return branch;
  // timm's drop_path: one Bernoulli(keep) draw per sample, survivors scaled by 1 / keep.
  const double keep = 1.0 - drop_path_;
  std::vector<int64_t> shape(branch.dim(), 1);
  shape[0] = branch.size(0);
  const auto mask = torch::empty(shape, branch.options()).bernoulli_(keep).div_(keep);
  return branch * mask;
}

torch::Tensor UnicomBlockImpl::forward(const torch::Tensor& x) {
  auto y = x + drop_path(detail::self_attention(norm1_(x), qkv_->weight, {}, proj_->weight, proj_->bias,
                                                num_heads_));
  return y + drop_path(fc2_(torch::hardtanh(fc1_(norm2_(y)), 0.0, 6.0)));  // ReLU6
}

ViTUnicomImpl::ViTUnicomImpl(ViTUnicomOptions options)
    : options_(std::move(options)), arch_(vit_unicom_arch(options_.arch)) {
  const int64_t dim = arch_.dim;
  const int64_t grid = arch_.input_size / arch_.patch_size;
  const int64_t patches = grid * grid;
  auto patch_embed = register_module("patch_embed", std::make_shared<nn::Module>("PatchEmbedding"));
  patch_proj_ = patch_embed->register_module(
      "proj", nn::Conv2d(nn::Conv2dOptions(3, dim, arch_.patch_size).stride(arch_.patch_size)));
  pos_embed_ = register_parameter("pos_embed", torch::zeros({1, patches, dim}));
  blocks_ = register_module("blocks", nn::ModuleList());
  for (int64_t i = 0; i < arch_.depth; ++i) {
    // torch.linspace(0, drop_path_rate, depth)[i]
    const double rate = arch_.depth == 1 ? 0.0
                                         : arch_.drop_path_rate * static_cast<double>(i) /
                                               static_cast<double>(arch_.depth - 1);
    blocks_->push_back(UnicomBlock(dim, arch_.num_heads, rate));
  }
  norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({dim})));
  auto feature = register_module("feature", std::make_shared<nn::Module>("Sequential"));
  feature0_ = feature->register_module("0", nn::Linear(nn::LinearOptions(dim * patches, dim).bias(false)));
  feature1_ =
      feature->register_module("1", nn::BatchNorm1d(nn::BatchNormOptions(dim).eps(kFeatureBatchNormEps)));
  feature2_ =
      feature->register_module("2", nn::Linear(nn::LinearOptions(dim, arch_.embedding_size).bias(false)));
  feature3_ = feature->register_module(
      "3", nn::BatchNorm1d(nn::BatchNormOptions(arch_.embedding_size).eps(kFeatureBatchNormEps)));

  {
    // UNICOM's initialisation: truncated normal (0.02) for the position embedding and every
    // linear weight, zero biases; PyTorch's defaults for the rest.
    torch::NoGradGuard no_grad;
    detail::trunc_normal(pos_embed_, 0.02);
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* linear = module->as<nn::Linear>()) {
        detail::trunc_normal(linear->weight, 0.02);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    }
  }

  if (!options_.weights.empty()) load_weights(options_.weights);
}

void ViTUnicomImpl::load_weights(const std::string& weights) {
  const std::string path = resolve_weights(weights, "vit_unicom", arch_.name);
  const auto content = io::read_torch_file(path);
  // As OML: the backbone is what precedes `norm.bias`; criterion and other entries are dropped.
  // UNICOM's own files are plain state dicts (prefix ""), in float16 (the copy converts).
  const auto backbone = io::select_backbone(io::find_state_dict(content, path), "norm.bias", path);
  try {
    io::load_state_dict(*this, backbone, path);
  } catch (DataError& e) {
    const std::string file_arch = guess_unicom_arch(backbone);
    if (!file_arch.empty() && file_arch != arch_.name) {
      e.add_context("the file holds " + file_arch + " weights, the model is arch " + arch_.name);
    }
    throw;
  }
}

torch::Tensor ViTUnicomImpl::forward(torch::Tensor images) {
  const int64_t size = arch_.input_size;
  OML_CHECK(images.dim() == 4 && images.size(1) == 3, DataError,
            "vit_unicom expects images [B, 3, H, W], got ", images.sizes());
  // The position embedding and `feature`'s first layer are for one grid of patches.
  OML_CHECK(images.size(2) == size && images.size(3) == size, DataError, "vit_unicom ", arch_.name,
            " takes images of ", size, "x", size, " px, got ", images.size(2), "x", images.size(3),
            " (resize them to ", size, ", e.g. transforms unicom_transforms with im_size: ", size, ")");
  const int64_t batch = images.size(0);
  auto x = patch_proj_(images).flatten(2).transpose(1, 2) + pos_embed_;
  for (const auto& block : *blocks_) x = block->as<UnicomBlock>()->forward(x);
  x = norm_(x.to(torch::kFloat)).reshape({batch, -1});
  auto out = feature3_(feature2_(feature1_(feature0_(x))));
  return options_.normalise_features ? normalise_detached(out) : out;
}

}  // namespace oml::models
