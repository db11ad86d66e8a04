#include "oml/optim/clipping.h"

#include <torch/nn/utils/clip_grad.h>

namespace oml::optim {

double clip_gradients(const std::vector<at::Tensor>& parameters, double clip_val,
                      config::GradientClipAlgorithm algorithm) {
  // LibTorch's functions follow torch.nn.utils' formulas on both LibTorch versions:
  // grad x min(1, max_norm / (total_norm + 1e-6)), and clamp(grad, -val, val).
  if (algorithm == config::GradientClipAlgorithm::norm) {
    return torch::nn::utils::clip_grad_norm_(parameters, clip_val, /*norm_type=*/2.0);
  }
  torch::nn::utils::clip_grad_value_(parameters, clip_val);
  return 0.0;
}

}  // namespace oml::optim
