#pragma once
// The one place that knows which LibTorch oml-cpp is compiled against.
//
// oml-cpp builds from one source tree against Debian 12's LibTorch 1.13 and against LibTorch 2.x
// (the pinned torch wheel's, or the same libraries from a LibTorch zip). Every API difference
// between them is resolved here, by TORCH_VERSION_MAJOR/MINOR or by the build's own macros; the
// rest of oml_core calls these names and never tests a version. Private to oml_core (core/src).
//
// What differs, and where it is used:
//   - c10d: ProcessGroupGloo/NCCL derive from c10d::Backend since 2.0 (ProcessGroup in 1.13)
//     -> C10dBackend, used by distributed/c10d_adapter.cpp only.
//   - autocast: the device-generic API (is_autocast_enabled(device), ...) since 2.4; the
//     per-device functions of 1.13 are deprecated and warn at run time in 2.x
//     -> autocast_enabled / set_autocast_enabled / autocast_dtype / set_autocast_dtype.
//   - Optimizer::zero_grad(set_to_none) since 2.0 (1.13 zeroes in place)
//     -> zero_grad(optimizer): gradients set to none on both, as PyTorch 2.x's default.
//   - Optimizer::state_ is keyed by the parameter's TensorImpl* since 2.0 (its printed address,
//     a std::string, in 1.13) -> optimizer_state_key, used by optim/formula_optimizers.cpp.
//   - logging: c10 logs through glog in Debian's build (C10_USE_GLOG), through its own
//     minimal logger in the wheel's -> set_library_log_level (common/runtime.cpp calls it).
//   - at::scaled_dot_product_attention since 2.0 (1.13 has none: written_out_attention there)
//     -> has_fused_attention, scaled_dot_product_attention, used by models/attention.cpp (the
//     ViTs and text encoders).
//   - the CPU flash-attention kernel packs bfloat16 / half GEMMs for AMX tiles since 2.5
//     (at::native::cpublas::could_pack) -> cpu_flash_attention_packs, models/attention.cpp.
//   - the profiler: Kineto (torch/csrc/autograd/profiler_kineto.h) records in 2.x; Debian's
//     1.13 is built without Kineto, so there the legacy profiler's RecordProfile writes the
//     trace -> report/profiler.cpp tests OML_TORCH_AT_LEAST(2, 0) itself, to keep the profiler's
//     headers out of this file's every user.
//   - c10::Event::synchronize in 2.x (1.13's Event has query() only)
//     -> synchronize_event, used by common/pending_scalars.cpp.
//   - the optimizers' multi-tensor kernels: at::_foreach_lerp_ in 2.x (1.13 has the other
//     _foreach_ ops optim/multi_tensor.cpp uses), at::_fused_adam_ / _fused_adamw_ / _fused_sgd_
//     on the CPU and CUDA since 2.4 (1.13: _fused_adam_ on CUDA only, neither of the others)
//     -> foreach_lerp_, has_fused_optimizers, fused_adam_, fused_sgd_, used by
//     optim/multi_tensor.cpp.
//
// Not a version difference but a build difference, resolved where it is used: the BLAS
// (OpenBLAS behind libblas.so.3 for Debian's, MKL inside libtorch_cpu for the wheel's;
// common/runtime.cpp) and the Gloo headers (Debian's libgloo-dev for both: see
// docs/building.md#libtorch).

#include <ATen/Functions.h>
#include <ATen/autocast_mode.h>
#include <c10/core/Event.h>
#include <c10/macros/Macros.h>
#include <c10/util/Logging.h>       // glog's or c10's own, by C10_USE_GLOG
#include <c10/util/string_utils.h>  // c10::guts::to_string (1.13's optimizer state keys)
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#define OML_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// 2.4 is the oldest 2.x whose API this file covers (the device-generic autocast functions);
// 2.11 is the release the project pins and tests.
static_assert(OML_TORCH_AT_LEAST(2, 4) || (TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13),
              "oml-cpp builds against LibTorch 1.13 or 2.4 and later");

#if OML_TORCH_AT_LEAST(2, 5)
#include <ATen/native/CPUBlas.h>  // cpublas::could_pack
#endif

namespace c10d {
#if OML_TORCH_AT_LEAST(2, 0)
class Backend;
#else
class ProcessGroup;
#endif
}  // namespace c10d

namespace oml::torch_compat {

/// The class a Gloo or NCCL process group object derives from.
#if OML_TORCH_AT_LEAST(2, 0)
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

/// The key of `param`'s entry in torch::optim::Optimizer::state_.
inline auto optimizer_state_key(const at::Tensor& param) {
#if OML_TORCH_AT_LEAST(2, 0)
  return static_cast<void*>(param.unsafeGetTensorImpl());
#else
  return c10::guts::to_string(param.unsafeGetTensorImpl());
#endif
}

inline bool autocast_enabled(c10::DeviceType device) {
#if OML_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if OML_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
#if OML_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
#if OML_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

/// softmax(q k^T / sqrt(head_dim)) v for q, k, v [B, heads, N, head_dim], written out — matmul,
/// masked softmax, matmul, as transformers' "eager" attention and OML's own ViTs — where `key_mask`
/// (boolean, broadcastable to [B, heads, N, N], true: attend; undefined: attend everywhere) leaves
/// keys out and the attention weights are dropped with probability `dropout_p`. Under autocast each
/// operator follows its own rule, as in PyTorch. Stores the [B, heads, N, N] weights for backward.
inline at::Tensor written_out_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_mask, double dropout_p) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (key_mask.defined()) {
    scores = scores.masked_fill(key_mask.logical_not(), -std::numeric_limits<double>::infinity());
  }
  auto weights = at::softmax(scores, -1);
  if (dropout_p > 0) weights = at::dropout(weights, dropout_p, /*train=*/true);
  return at::matmul(weights.to(v.scalar_type()), v);
}

/// Whether ATen has a fused scaled_dot_product_attention (2.0 and later).
constexpr bool has_fused_attention = OML_TORCH_AT_LEAST(2, 0);

/// The same as written_out_attention, through ATen's fused scaled_dot_product_attention since 2.0
/// (under autocast it runs in the autocast dtype; flash / memory-efficient kernels, the [B, heads,
/// N, N] weights never stored); on 1.13 written_out_attention itself. Equal within float rounding.
/// Every query row must have a key to attend to (a row whose keys are all masked is NaN in both).
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& key_mask, double dropout_p) {
#if OML_TORCH_AT_LEAST(2, 0)
  const c10::optional<at::Tensor> mask =
      key_mask.defined() ? c10::optional<at::Tensor>(key_mask) : c10::nullopt;
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p);
#else
  return written_out_attention(q, k, v, key_mask, dropout_p);
#endif
}

/// Whether ATen's CPU flash-attention kernel runs `dtype`'s (bfloat16's, half's) GEMMs on AMX
/// tiles: 2.5 and later pack them where the CPU can (could_pack); without, and before 2.5, it runs
/// them through generic GEMMs on small blocks, 2-7x slower than its float32 path
/// (docs/benchmarks.md). False for float32, and on 1.13, which has no fused kernel.
inline bool cpu_flash_attention_packs(c10::ScalarType dtype) {
  if (dtype != c10::ScalarType::BFloat16 && dtype != c10::ScalarType::Half) return false;
#if OML_TORCH_AT_LEAST(2, 5)
  return at::native::cpublas::could_pack(dtype);
#else
  return false;
#endif
}

/// Blocks until the work recorded before `event` is done (only that work: a stream's later work
/// is not waited for). 1.13's Event has no synchronize(): there its query() is polled.
inline void synchronize_event(const c10::Event& event) {
#if OML_TORCH_AT_LEAST(2, 4)
  event.synchronize();
#else
  while (!event.query()) std::this_thread::yield();
#endif
}

/// at::_foreach_lerp_(self, end, weight): self[i] += weight * (end[i] - self[i]) for every i. On
/// 1.13 (no _foreach_lerp_) each tensor's lerp_, what 2.x's foreach op does on CPU tensors.
inline void foreach_lerp_(at::TensorList self, at::TensorList end, double weight) {
#if OML_TORCH_AT_LEAST(2, 4)
  at::_foreach_lerp_(self, end, at::Scalar(weight));
#else
  for (std::size_t i = 0; i < self.size(); ++i) self[i].lerp_(end[i], weight);
#endif
}

/// Whether ATen has the fused optimizer kernels on the CPU and CUDA (fused_adam_, fused_sgd_).
constexpr bool has_fused_optimizers = OML_TORCH_AT_LEAST(2, 4);

/// at::_fused_adam_, or at::_fused_adamw_ with `decoupled_weight_decay` (torch/optim/adam.py's
/// _fused_adam), without grad_scale; `found_inf` (float32 [1] on the parameters' device, or
/// undefined) makes the kernel leave everything as it is where it is nonzero, as under
/// GradScaler. `lr` is a double, or a float32 tensor on the
/// parameters' device (torch.optim's tensor lr: what a CUDA graph's replay reads afresh). Only
/// where has_fused_optimizers (an internal error elsewhere: the optimizers' args refuse `fused:
/// true` there).
template <class LearningRate>
inline void fused_adam_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                        at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                        at::TensorList state_steps, const LearningRate& lr, double beta1, double beta2,
                        double weight_decay, double eps, bool amsgrad, bool maximize,
                        bool decoupled_weight_decay, const at::Tensor& found_inf) {
#if OML_TORCH_AT_LEAST(2, 4)
  const std::optional<at::Tensor> skip =
      found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  if (decoupled_weight_decay) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                      weight_decay, eps, amsgrad, maximize, /*grad_scale=*/std::nullopt, skip);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, maximize, /*grad_scale=*/std::nullopt, skip);
  }
#else
  TORCH_INTERNAL_ASSERT(false, "fused optimizer kernels need LibTorch 2.4 or later");
#endif
}

/// at::_fused_sgd_ (torch/optim/sgd.py's _fused_sgd) without grad_scale; `found_inf`, `lr` and
/// where it exists as fused_adam_'s.
template <class LearningRate>
inline void fused_sgd_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                       double weight_decay, double momentum, const LearningRate& lr, double dampening,
                       bool nesterov, bool maximize, bool is_first_step, const at::Tensor& found_inf) {
#if OML_TORCH_AT_LEAST(2, 4)
  const std::optional<at::Tensor> skip =
      found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  at::_fused_sgd_(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov, maximize,
                  is_first_step, /*grad_scale=*/std::nullopt, skip);
#else
  TORCH_INTERNAL_ASSERT(false, "fused optimizer kernels need LibTorch 2.4 or later");
#endif
}

/// Clears every gradient (sets it to none), as PyTorch 2.x's `optimizer.zero_grad()`: a
/// parameter that gets no gradient in a step is then skipped by the optimizer on both
/// LibTorches, instead of being updated with a zero gradient (1.13's zero_grad()).
inline void zero_grad(torch::optim::Optimizer& optimizer) {
#if OML_TORCH_AT_LEAST(2, 0)
  optimizer.zero_grad(/*set_to_none=*/true);
#else
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) param.mutable_grad().reset();
  }
#endif
}

/// LibTorch's own log (c10 warnings, c10d's messages) to stderr at warning level when
/// `verbose`, only fatal messages otherwise. `program` names the process in glog's lines.
inline void set_library_log_level(const char* program, bool verbose) {
#ifdef C10_USE_GLOG
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = verbose ? google::GLOG_WARNING : google::GLOG_FATAL;
  if (!google::IsGoogleLoggingInitialized()) {
    static const std::string name = program;  // glog keeps the pointer
    google::InitGoogleLogging(name.c_str());
  }
#else
  (void)program;
  FLAGS_caffe2_log_level = verbose ? c10::GLOG_WARNING : c10::GLOG_FATAL;
#endif
}

}  // namespace oml::torch_compat
