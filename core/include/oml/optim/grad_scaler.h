#pragma once
// Dynamic loss scaling for float16 training (`precision: 16`, CUDA), as PyTorch's
// torch.cuda.amp.GradScaler — which LibTorch 1.13's C++ API does not have:
//
//   scaler.scale(loss).backward();     // gradients of loss x scale: small ones survive float16
//   gradient sync                      // (averaging scaled gradients is averaging gradients)
//   if (scaler.unscale(params)) optimizer.step();   // false: some gradient is Inf/NaN, skip
//   scaler.update();                   // halve the scale after an overflow, double it after
//                                      // growth_interval clean steps
//
// unscale() reads its answer back, as torch.amp.GradScaler.step does for an optimizer without a
// fused kernel. A fused optimizer decides on the device instead (optim::DeviceSkipping):
//
//   scaler.unscale_in_place(params);
//   optimizer.skip_next_step_if(scaler.found_inf());  optimizer.step();
//   scaler.update();                   // scale_tensor() / skipped_steps_tensor() for the logs
//
// On CUDA tensors it uses ATen's fused kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_) — written for CUDA builds and untested here. LibTorch 1.13 has no CPU
// kernels for them, so CPU tensors take an equivalent path of plain tensor ops (what the unit
// tests exercise; the CPU trainer never uses a scaler: bf16 needs none).

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace oml::optim {

/// PyTorch's GradScaler defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// `loss` x the current scale (the scale lives on the loss's device from the first call on).
  at::Tensor scale(const at::Tensor& loss);
  /// Divides the gradients of `parameters` (those that have one) by the scale, in place.
  /// Returns false when any of them is Inf or NaN: the optimizer step must be skipped.
  bool unscale(const std::vector<at::Tensor>& parameters);
  /// The same without reading the answer: found_inf() holds it, on the scale's device (on CUDA
  /// nothing waits for the GPU).
  void unscale_in_place(const std::vector<at::Tensor>& parameters);
  /// [1] float32: 1 when the last unscale saw Inf/NaN, else 0.
  const at::Tensor& found_inf() const { return found_inf_; }
  /// After each step (applied or skipped): backoff on an overflow seen by unscale, growth after
  /// growth_interval steps without one.
  void update();

  double current_scale() const;
  /// Steps skipped so far because of non-finite gradients (a read of skipped_steps_tensor()).
  int64_t skipped_steps() const;
  /// The scale and that count as [1] tensors on the scale's device, copies taken now: for logs
  /// read later without waiting (PendingScalars).
  at::Tensor scale_tensor() const;
  at::Tensor skipped_steps_tensor() const;

  /// What a resumed run needs to continue with the same scale, as PyTorch's
  /// GradScaler.state_dict(): {"scale": float, "growth_factor": float, "backoff_factor": float,
  /// "growth_interval": int, "_growth_tracker": int}.
  c10::IValue state() const;
  /// Restores scale and growth tracker from state(); the factors and interval stay this
  /// scaler's (as PyTorch's load_state_dict). DataError naming the entry when one is missing or
  /// of the wrong type (a damaged checkpoint).
  void load_state(const c10::IValue& state);

 private:
  GradScalerOptions options_;
  double start_scale_;         ///< the scale the first scale() call starts from
  int64_t start_growth_ = 0;   ///< the growth tracker it starts from
  at::Tensor scale_;           ///< [1] float32
  at::Tensor growth_tracker_;  ///< [1] int32: clean steps since the last change
  at::Tensor found_inf_;       ///< [1] float32: 1 when the last unscale saw Inf/NaN
  at::Tensor skipped_;         ///< [1] float32: the sum of every unscale's found_inf
};

}  // namespace oml::optim
