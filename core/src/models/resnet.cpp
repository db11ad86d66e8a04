#include "oml/models/resnet.h"

#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/zoo.h"

namespace oml::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

nn::Sequential downsample(int64_t in, int64_t out, int64_t stride) {
  nn::Sequential seq;
  seq->push_back(conv(in, out, 1, stride, 0));
  seq->push_back(nn::BatchNorm2d(out));
  return seq;
}

// The blocks' ReLUs and residual sums run in place, as torchvision's (ReLU(inplace=True), out +=
// identity): batch norm's backward reads its input, not its output, so the output may be
// overwritten. A fresh tensor for each made resnet50's step at 224 px ~15 % slower on the CPU
// (new pages to fault in) and its peak memory 0.7-1.4 GB larger (docs/benchmarks.md).

// torchvision's BasicBlock: two 3x3 convolutions (resnet18/34).
struct BasicBlockImpl : nn::Module {
  static constexpr int64_t expansion = 1;
  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 3, stride, 1));
    bn1 = register_module("bn1", nn::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(planes));
    if (stride != 1 || in != planes) ds = register_module("downsample", downsample(in, planes, stride));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out));
    return out.add_(ds ? ds->forward(x) : x).relu_();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential ds{nullptr};
};
TORCH_MODULE(BasicBlock);

// torchvision's Bottleneck (V1.5: stride on the 3x3 convolution), resnet50/101/152.
struct BottleneckImpl : nn::Module {
  static constexpr int64_t expansion = 4;
  BottleneckImpl(int64_t in, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 1, 1, 0));
    bn1 = register_module("bn1", nn::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(planes));
    conv3 = register_module("conv3", conv(planes, planes * expansion, 1, 1, 0));
    bn3 = register_module("bn3", nn::BatchNorm2d(planes * expansion));
    if (stride != 1 || in != planes * expansion) {
      ds = register_module("downsample", downsample(in, planes * expansion, stride));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto out = bn1(conv1(x)).relu_();
    out = bn2(conv2(out)).relu_();
    out = bn3(conv3(out));
    return out.add_(ds ? ds->forward(x) : x).relu_();
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential ds{nullptr};
};
TORCH_MODULE(Bottleneck);

struct ArchSpec {
  bool bottleneck;
  std::array<int64_t, 4> blocks;
};

ArchSpec arch_spec(const std::string& arch) {
  if (arch == "resnet18") return {false, {2, 2, 2, 2}};
  if (arch == "resnet34") return {false, {3, 4, 6, 3}};
  if (arch == "resnet50" || arch == "resnet50_projector") return {true, {3, 4, 6, 3}};
  if (arch == "resnet101") return {true, {3, 4, 23, 3}};
  if (arch == "resnet152") return {true, {3, 8, 36, 3}};
  config::fail_argument(
      "extractor 'resnet'", "arch", "unknown arch '", arch,
      "'; expected one of resnet18, resnet34, resnet50, resnet101, resnet152, resnet50_projector");
}

// torchvision's initialisation, so that a freshly built model trains like a Python one.
void init_like_torchvision(nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {
    if (auto* c = child->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = child->as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
}

// A MoCo training checkpoint (OML's resnet50_moco_v2: moco_v2_800ep_pretrain.pth.tar) holds the
// query encoder under `module.encoder_q.`, beside the key encoder and the queue: keep the query
// encoder, as OML's load_moco_weights does. Other files pass unchanged.
io::StateDict moco_encoder(io::StateDict weights) {
  const std::string prefix = "module.encoder_q.";
  io::StateDict encoder;
  for (const auto& [name, tensor] : weights) {
    if (name.compare(0, prefix.size(), prefix) == 0) encoder.emplace(name.substr(prefix.size()), tensor);
  }
  return encoder.empty() ? weights : encoder;
}

// The network inside a weights file, found as OML's ResnetExtractor finds it: MoCo's query
// encoder, then whatever precedes `layer4.` (`model.model.` in OML's Lightning checkpoints,
// `model.` in an extractor's state dict) is removed and the rest (the criterion's weights) dropped.
io::StateDict resnet_weights(const std::string& path) {
  io::StateDict weights = moco_encoder(io::find_state_dict(io::read_torch_file(path), path));
  const std::string trial_key = "layer4.0.conv1.weight";
  for (const auto& entry : weights) {
    if (ends_with(entry.first, trial_key)) return io::select_backbone(weights, trial_key, path);
  }
  return weights;  // not a resnet's: load_state_dict says what does not fit
}

}  // namespace

void check_options(const ResNetOptions& o) {
  const std::string who = "extractor 'resnet'";
  (void)arch_spec(o.arch);
  config::check_argument(!o.gem_p || *o.gem_p > 0, who, "gem_p", "gem_p must be > 0, got ",
                         o.gem_p.value_or(0));
  config::check_argument(o.fc_outputs() > 0, who, "num_classes", "num_classes must be > 0, got ",
                         o.fc_outputs());
  check_zoo_weights(o.weights, "resnet", o.arch);
}

ResNetImpl::ResNetImpl(ResNetOptions options) : options_(std::move(options)) {
  check_options(options_);
  const ArchSpec spec = arch_spec(options_.arch);
  bottleneck_ = spec.bottleneck;
  conv1_ = register_module("conv1", conv(3, 64, 7, 2, 3));
  bn1_ = register_module("bn1", nn::BatchNorm2d(64));
  layer1_ = register_module("layer1", make_layer(64, spec.blocks[0], 1));
  layer2_ = register_module("layer2", make_layer(128, spec.blocks[1], 2));
  layer3_ = register_module("layer3", make_layer(256, spec.blocks[2], 2));
  layer4_ = register_module("layer4", make_layer(512, spec.blocks[3], 2));
  if (!options_.remove_fc && options_.arch == "resnet50_projector") {
    // OML's resnet50_projector(): torchvision's resnet50(num_classes=128) whose fc becomes
    // Sequential(Linear(2048, 2048), ReLU, fc) — names fc.0.*, fc.2.* (MoCo v2's head).
    projector_ = nn::Sequential(nn::Linear(in_planes_, in_planes_), nn::ReLU(),
                                nn::Linear(in_planes_, options_.fc_outputs()));
    register_module("fc", projector_);
  } else if (!options_.remove_fc) {
    fc_ = register_module("fc", nn::Linear(in_planes_, options_.fc_outputs()));
  }
  init_like_torchvision(*this);
  if (!options_.weights.empty()) {
    io::LoadOptions load;
    // A classifier checkpoint (e.g. torchvision's ImageNet weights) fits a model without fc; so
    // does a resnet50_projector one (OML loads its head, then drops it).
    if (options_.remove_fc) load.ignore_prefixes.push_back("fc.");
    const std::string path = resolve_weights(options_.weights, "resnet", options_.arch);
    io::load_state_dict(*this, resnet_weights(path), path, load);
  }
}

nn::Sequential ResNetImpl::make_layer(int64_t planes, int64_t blocks, int64_t stride) {
  nn::Sequential layer;
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t s = i == 0 ? stride : 1;
    if (bottleneck_) {
      layer->push_back(Bottleneck(in_planes_, planes, s));
      in_planes_ = planes * BottleneckImpl::expansion;
    } else {
      layer->push_back(BasicBlock(in_planes_, planes, s));
      in_planes_ = planes * BasicBlockImpl::expansion;
    }
  }
  return layer;
}

torch::Tensor ResNetImpl::pooled_features(torch::Tensor images) {
  OML_CHECK(images.dim() == 4 && images.size(1) == 3, DataError, "resnet expects images [B, 3, H, W], got ",
            images.sizes());
  auto x = bn1_(conv1_(images)).relu_();
  x = torch::max_pool2d(x, 3, 2, 1);
  x = layer4_->forward(layer3_->forward(layer2_->forward(layer1_->forward(x))));
  return options_.gem_p ? gem_pool(x, *options_.gem_p) : x.mean({2, 3});
}

torch::Tensor ResNetImpl::forward(torch::Tensor images) {
  auto x = pooled_features(std::move(images));
  if (fc_) x = fc_(x);
  if (projector_) x = projector_->forward(x);
  return options_.normalise_features ? normalise_detached(x) : x;
}

int64_t ResNetImpl::feat_dim() const { return options_.remove_fc ? in_planes_ : options_.fc_outputs(); }

}  // namespace oml::models
