#pragma once
// Gradient clipping (`gradient_clip_val`, `gradient_clip_algorithm`), as Lightning applies it
// before each optimizer step: torch.nn.utils.clip_grad_norm_(parameters, val, norm_type=2) or
// clip_grad_value_(parameters, val) over every parameter the optimizer updates.

#include <ATen/core/Tensor.h>

#include <vector>

#include "oml/config/training_controls.h"

namespace oml::optim {

/// Clips the gradients of `parameters` in place (those without one are skipped). Returns the
/// total 2-norm of the gradients before clipping as a scalar tensor on their device, not read
/// (norm; reading it would make the host wait for the device), or an undefined tensor (value,
/// or no gradient at all). Nothing here waits for the device, so a CUDA graph can capture it.
at::Tensor clip_gradients(const std::vector<at::Tensor>& parameters, double clip_val,
                          config::GradientClipAlgorithm algorithm);

}  // namespace oml::optim
