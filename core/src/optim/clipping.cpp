#include "oml/optim/clipping.h"

#include <torch/nn/utils/clip_grad.h>

namespace oml::optim {

namespace {

// LibTorch's clip_grad_norm_ (torch/nn/utils/clip_grad.h, norm_type 2) without its final
// total_norm.item(): grad x min(1, max_norm / (total_norm + 1e-6)), total_norm the 2-norm of
// the gradients' 2-norms, all of it queued on the gradients' device.
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
  std::vector<at::Tensor> grads, norms;
  for (const at::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    norms.push_back(p.grad().detach().norm(2));
  }
  if (grads.empty()) return {};
  const at::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const at::Tensor clip_coef = torch::clamp_max(max_norm / (total + 1e-6), 1.0);
  for (at::Tensor& grad : grads) grad.detach().mul_(clip_coef);
  return total;
}

}  // namespace

at::Tensor clip_gradients(const std::vector<at::Tensor>& parameters, double clip_val,
                          config::GradientClipAlgorithm algorithm) {
  if (algorithm == config::GradientClipAlgorithm::norm) return clip_grad_norm(parameters, clip_val);
  // clip_grad_value_ clamps each gradient in place and reads nothing back.
  torch::nn::utils::clip_grad_value_(parameters, clip_val);
  return {};
}

}  // namespace oml::optim
