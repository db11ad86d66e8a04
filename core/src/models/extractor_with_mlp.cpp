#include "oml/models/extractor_with_mlp.h"

#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/io/state_dict.h"

namespace oml::models {

ExtractorWithMLPImpl::ExtractorWithMLPImpl(std::shared_ptr<Extractor> backbone,
                                           ExtractorWithMLPOptions options)
    : options_(std::move(options)), backbone_(std::move(backbone)) {
  namespace nn = torch::nn;
  OML_ASSERT(backbone_ != nullptr);
  OML_CHECK(!options_.mlp_features.empty(), ConfigError,
            "extractor_with_mlp: mlp_features must not be empty");
  OML_CHECK(options_.freeze_n_epochs >= 0, ConfigError,
            "extractor_with_mlp: freeze_n_epochs must be >= 0, got ", options_.freeze_n_epochs);
  register_module("extractor", backbone_);
  projection_ = nn::Sequential();
  int64_t in = backbone_->feat_dim();
  for (std::size_t i = 0; i < options_.mlp_features.size(); ++i) {
    const int64_t out = options_.mlp_features[i];
    OML_CHECK(out > 0, ConfigError, "extractor_with_mlp: mlp_features[", i, "] must be > 0, got ", out);
    projection_->push_back(nn::Linear(in, out));
    if (i + 1 < options_.mlp_features.size()) projection_->push_back(nn::ReLU());
    in = out;
  }
  register_module("projection", projection_);
  if (!options_.weights.empty()) io::load_weights(*this, options_.weights);
  // Starts unfrozen even when the args ask for freezing: the training loop applies the schedule
  // at each epoch's start, after gradient synchronisation has hooked every parameter (a hook
  // cannot be put on a tensor that does not require grad).
}

torch::Tensor ExtractorWithMLPImpl::forward(torch::Tensor images) {
  torch::Tensor features;
  if (frozen_) {
    torch::NoGradGuard no_grad;  // no graph through a frozen backbone: saves memory and time
    features = backbone_->forward(images);
  } else {
    features = backbone_->forward(images);
  }
  auto out = projection_->forward(features);
  return options_.normalise_features ? normalise_detached(out) : out;
}

int64_t ExtractorWithMLPImpl::feat_dim() const { return options_.mlp_features.back(); }

BackboneFreezing ExtractorWithMLPImpl::requested_freezing() const {
  return BackboneFreezing{options_.freeze_n_epochs, !options_.train_backbone};
}

void ExtractorWithMLPImpl::set_backbone_frozen(bool frozen) {
  frozen_ = frozen;
  for (auto& p : backbone_->parameters()) p.set_requires_grad(!frozen);
  train(is_training());
}

void ExtractorWithMLPImpl::train(bool on) {
  torch::nn::Module::train(on);
  if (frozen_) backbone_->eval();
}

}  // namespace oml::models
