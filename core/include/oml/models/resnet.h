#pragma once
// ResNet extractors with torchvision's parameter and buffer names, so that state dicts move
// between oml-cpp and PyTorch in both directions (`conv1.weight`, `layer1.0.bn1.running_mean`,
// `layer2.0.downsample.0.weight`, `fc.bias`, ...).

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <optional>
#include <string>

#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: resnet, args: {arch: resnet50, gem_p: 3.0, remove_fc: true}}`
struct ResNetOptions {
  /// resnet18 | resnet34 | resnet50 | resnet101 | resnet152 | resnet50_projector (OML's: a
  /// resnet50 whose fc is a projection head Linear(2048, 2048), ReLU, Linear(2048, num_classes))
  std::string arch = "resnet50";
  std::optional<double> gem_p;         ///< GeM pooling power instead of average pooling
  bool remove_fc = true;               ///< embeddings = pooled features (512 or 2048-d)
  bool normalise_features = false;     ///< divide embeddings by their (detached) L2 norm
  std::optional<int64_t> num_classes;  ///< fc outputs when remove_fc is false (1000; 128 for the projector)
  std::string weights;                 ///< file or zoo name (resnet50_imagenet1k_v1, ...); "" = random init

  /// num_classes or the arch's default.
  int64_t fc_outputs() const { return num_classes.value_or(arch == "resnet50_projector" ? 128 : 1000); }
};

/// config::ArgumentError naming the first bad field (a zoo name for another arch included);
/// reads no file.
void check_options(const ResNetOptions& options);

class ResNetImpl : public Extractor {
 public:
  explicit ResNetImpl(ResNetOptions options = {});

  torch::Tensor forward(torch::Tensor images) override;
  /// Pooled features before fc / normalisation, [B, 512 * expansion].
  torch::Tensor pooled_features(torch::Tensor images);
  int64_t feat_dim() const override;
  std::string oml_module_attribute() const override { return "model"; }  // ResnetExtractor.model

  const ResNetOptions& options() const { return options_; }

 private:
  torch::nn::Sequential make_layer(int64_t planes, int64_t blocks, int64_t stride);

  ResNetOptions options_;
  bool bottleneck_ = false;
  int64_t in_planes_ = 64;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
  torch::nn::Linear fc_{nullptr};             ///< the classifier (remove_fc: false)
  torch::nn::Sequential projector_{nullptr};  ///< resnet50_projector's fc (remove_fc: false)
};
TORCH_MODULE(ResNet);

}  // namespace oml::models
