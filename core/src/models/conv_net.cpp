#include "oml/models/conv_net.h"

#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/io/state_dict.h"

namespace oml::models {

void check_options(const ConvNetOptions& o) {
  const std::string who = "extractor 'conv_net'";
  config::check_argument(o.in_channels > 0, who, "in_channels", "in_channels must be > 0, got ",
                         o.in_channels);
  config::check_argument(!o.channels.empty(), who, "channels", "channels must list at least one stage");
  for (std::size_t i = 0; i < o.channels.size(); ++i) {
    config::check_argument(o.channels[i] > 0, who, "channels", "channels[", i, "] must be > 0, got ",
                           o.channels[i]);
  }
  config::check_argument(o.feat_dim > 0, who, "feat_dim", "feat_dim must be > 0, got ", o.feat_dim);
  config::check_argument(!o.gem_p || *o.gem_p > 0, who, "gem_p", "gem_p must be > 0, got ",
                         o.gem_p.value_or(0));
}

ConvNetImpl::ConvNetImpl(ConvNetOptions options) : options_(std::move(options)) {
  namespace nn = torch::nn;
  check_options(options_);
  stages_ = nn::ModuleList();
  int64_t in = options_.in_channels;
  for (std::size_t i = 0; i < options_.channels.size(); ++i) {
    const int64_t out = options_.channels[i];
    nn::Sequential stage;
    for (int64_t in_c : {in, out}) {
      stage->push_back(nn::Conv2d(nn::Conv2dOptions(in_c, out, 3).padding(1).bias(false)));
      stage->push_back(nn::BatchNorm2d(out));
      stage->push_back(nn::ReLU(nn::ReLUOptions(true)));
    }
    // Downsample between stages only: the last stage keeps its resolution for pooling.
    if (i + 1 < options_.channels.size()) stage->push_back(nn::MaxPool2d(2));
    stages_->push_back(stage);
    in = out;
  }
  register_module("stages", stages_);
  proj_ = register_module("proj", nn::Linear(in, options_.feat_dim));
  if (!options_.weights.empty()) io::load_weights(*this, options_.weights);
}

torch::Tensor ConvNetImpl::forward(torch::Tensor images) {
  OML_CHECK(images.dim() == 4 && images.size(1) == options_.in_channels, DataError,
            "conv_net expects images [B, ", options_.in_channels, ", H, W], got ", images.sizes());
  auto x = images;
  for (const auto& stage : *stages_) x = stage->as<torch::nn::Sequential>()->forward(x);
  x = options_.gem_p ? gem_pool(x, *options_.gem_p) : x.mean({2, 3});
  x = proj_(x);
  return options_.normalise_features ? normalise_detached(x) : x;
}

}  // namespace oml::models
