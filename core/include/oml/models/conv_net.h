#pragma once
// A small convolutional extractor for 28-64 px images (Fashion-MNIST, thumbnails): fast enough
// to train on two CPU cores in minutes.

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <optional>
#include <string>
#include <vector>

#include "oml/models/extractor.h"

namespace oml::models {

/// `extractor: {name: conv_net, args: {channels: [16, 32, 64], feat_dim: 128}}`
struct ConvNetOptions {
  int64_t in_channels = 3;                    ///< image channels
  std::vector<int64_t> channels{16, 32, 64};  ///< one stage per entry (2 conv-bn-relu each)
  int64_t feat_dim = 128;                     ///< output embedding size
  std::optional<double> gem_p;                ///< GeM pooling power (default: average pooling)
  bool normalise_features = false;            ///< divide embeddings by their detached L2 norm
  std::string weights;                        ///< file to load ("" = random init)
};

/// config::ArgumentError naming the first bad field.
void check_options(const ConvNetOptions& options);

/// Stages of [conv3x3-bn-relu, conv3x3-bn-relu, maxpool2 (all but the last stage)], then
/// global pooling and a linear projection. Names: `stages.<i>.<j>.*`, `proj.*`.
class ConvNetImpl : public Extractor {
 public:
  explicit ConvNetImpl(ConvNetOptions options = {});
  torch::Tensor forward(torch::Tensor images) override;
  int64_t feat_dim() const override { return options_.feat_dim; }

 private:
  ConvNetOptions options_;
  torch::nn::ModuleList stages_{nullptr};  ///< each a Sequential
  torch::nn::Linear proj_{nullptr};
};
TORCH_MODULE(ConvNet);

}  // namespace oml::models
