#pragma once
// Resume state that is not a module's state dict: optimizer buffers and the random generator.

#include <ATen/core/Tensor.h>

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace oml::optim {

/// The optimizer's state (moments, step counts, group options) as bytes in a uint8 tensor. An
/// optimizer that may have skipped steps on the device takes its step counts from there first
/// (DeviceSkipping::settle_step_counts: one read).
at::Tensor save_optimizer_state(torch::optim::Optimizer& optimizer);
/// Restores what save_optimizer_state wrote into an optimizer over the same parameters.
/// DataError when the bytes do not fit (another optimizer, other parameter shapes).
void load_optimizer_state(torch::optim::Optimizer& optimizer, const at::Tensor& bytes);

/// State of the default CPU generator (torch::rand, randperm, dropout, miners).
at::Tensor save_rng_state();
void load_rng_state(const at::Tensor& state);

}  // namespace oml::optim
