#include "oml/models/extractor_with_mlp.h"

#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/io/state_dict.h"

namespace oml::models {

void check_options(const ExtractorWithMLPOptions& o) {
  const std::string who = "extractor 'extractor_with_mlp'";
  config::check_argument(!o.mlp_features.empty(), who, "mlp_features", "mlp_features must not be empty");
  for (std::size_t i = 0; i < o.mlp_features.size(); ++i) {
    config::check_argument(o.mlp_features[i] > 0, who, "mlp_features", "mlp_features[", i,
                           "] must be > 0, got ", o.mlp_features[i]);
  }
  config::check_argument(o.freeze_n_epochs >= 0, who, "freeze_n_epochs", "freeze_n_epochs must be >= 0, got ",
                         o.freeze_n_epochs);
}

ExtractorWithMLPImpl::ExtractorWithMLPImpl(std::shared_ptr<Extractor> backbone,
                                           ExtractorWithMLPOptions options)
    : options_(std::move(options)), backbone_(std::move(backbone)) {
  namespace nn = torch::nn;
  OML_ASSERT(backbone_ != nullptr);
  check_options(options_);
  const std::string attribute = backbone_->oml_module_attribute();
  if (attribute.empty()) {
    register_module("extractor", backbone_);
  } else {
    // OML's ViTExtractor / ResnetExtractor between the wrapper and the network: names
    // `extractor.model.*`. The holder only names; forward calls the backbone directly.
    auto holder = std::make_shared<torch::nn::Module>("OmlExtractor");
    holder->register_module(attribute, backbone_);
    register_module("extractor", holder);
  }
  projection_ = nn::Sequential();
  int64_t in = backbone_->feat_dim();
  for (std::size_t i = 0; i < options_.mlp_features.size(); ++i) {
    const int64_t out = options_.mlp_features[i];
    projection_->push_back(nn::Linear(in, out));
    if (i + 1 < options_.mlp_features.size()) projection_->push_back(nn::ReLU());
    projection_->push_back(nn::Identity());  // torchvision.ops.MLP's Dropout(p=0)
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

io::StateDict ExtractorWithMLPImpl::upgrade_names(io::StateDict weights) const {
  const io::StateDict expected = io::state_dict(*this);
  const std::string attribute = backbone_->oml_module_attribute();
  io::StateDict out;
  for (auto& [name, tensor] : weights) {
    std::string renamed = name;
    if (!expected.count(name)) {
      // The backbone directly under `extractor.`.
      if (!attribute.empty() && name.rfind("extractor.", 0) == 0)
        renamed = "extractor." + attribute + "." + name.substr(10);
      // Linear layer i at projection.<2i> (ReLU between, no Dropout positions).
      const std::string head = "projection.";
      if (name.rfind(head, 0) == 0) {
        const std::size_t dot = name.find('.', head.size());
        const std::string index = name.substr(head.size(), dot - head.size());
        if (dot != std::string::npos && !index.empty() &&
            index.find_first_not_of("0123456789") == std::string::npos && std::stoll(index) % 2 == 0)
          renamed = head + std::to_string(std::stoll(index) / 2 * 3) + name.substr(dot);
      }
      if (!expected.count(renamed)) renamed = name;  // not an old name: reported as unexpected
    }
    out.emplace(renamed, std::move(tensor));
  }
  return out;
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
