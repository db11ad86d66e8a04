#include "oml/models/extractor.h"

#include <torch/torch.h>

namespace oml::models {

torch::Tensor normalise_detached(const torch::Tensor& features) {
  return features / features.norm(2, /*dim=*/1, /*keepdim=*/true).detach();
}

torch::Tensor gem_pool(const torch::Tensor& x, double p, double eps) {
  return x.clamp_min(eps).pow(p).mean({2, 3}).pow(1.0 / p);
}

}  // namespace oml::models
