#include "oml/models/extractor.h"

#include <torch/torch.h>

#include "oml/common/error.h"

namespace oml::models {

void Extractor::set_backbone_frozen(bool /*frozen*/) {
  // Pipelines check freezable() first (and reject freezing configs for other extractors with a
  // ConfigError), so reaching this is a bug in the caller.
  throw InternalError("set_backbone_frozen called on an extractor without a separate backbone");
}

torch::Tensor normalise_detached(const torch::Tensor& features) {
  return features / features.norm(2, /*dim=*/1, /*keepdim=*/true).detach();
}

torch::Tensor gem_pool(const torch::Tensor& x, double p, double eps) {
  return x.clamp_min(eps).pow(p).mean({2, 3}).pow(1.0 / p);
}

}  // namespace oml::models
