#pragma once
// Mixed precision (`precision: bf16 | 16`): RAII guards around LibTorch's autocast, which is
// thread-local state. The Trainer opens an AutocastGuard around a training step's forward and
// loss, embed_dataset around each validation / prediction forward; the built-in losses open a
// Float32Guard so that they compute in float32 whatever the extractor produced.
//
// Parameters stay float32 (autocast casts them per op, caching the casts for the guard's
// lifetime), so the optimizer, gradient sync and checkpoints never see another dtype.
// CPU: bfloat16 only (oneDNN kernels). CUDA: float16 or bfloat16 — written for CUDA builds of
// LibTorch and untested here (the CPU-only build has no GPU).

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "oml/common/precision.h"

namespace oml {

/// Autocast on for `device`'s type with `precision`'s dtype for the guard's scope; a no-op for
/// Precision::fp32. At exit the previous state (enabled flag and dtype) is restored and, when
/// this was the outermost autocast region, the cache of cast weights is cleared (as Python's
/// `torch.autocast.__exit__`). ConfigError for fp16 on the CPU (use bf16).
///
/// `cache_casts` false: every op casts the weights afresh (`torch.autocast(cache_enabled=False)`),
/// what code captured into a CUDA graph needs — a cast cached outside the capture would be read
/// by every replay, stale once the optimizer has changed the weights.
class AutocastGuard {
 public:
  AutocastGuard(Precision precision, c10::Device device, bool cache_casts = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  /// The dtype ops on autocast's lower-precision list compute in (kFloat when off).
  c10::ScalarType dtype() const { return dtype_; }
  bool active() const { return active_; }

 private:
  c10::DeviceType device_type() const { return cuda_ ? c10::DeviceType::CUDA : c10::DeviceType::CPU; }

  bool active_ = false;
  bool cuda_ = false;
  c10::ScalarType dtype_ = c10::ScalarType::Float;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
  bool previous_cache_ = true;
};

/// Autocast off on every device type for the guard's scope (what `torch.autocast(enabled=False)`
/// does): code inside runs in the dtypes of its inputs — the losses cast their inputs to float32
/// first. Restores the previous state at exit.
class Float32Guard {
 public:
  Float32Guard();
  ~Float32Guard();
  Float32Guard(const Float32Guard&) = delete;
  Float32Guard& operator=(const Float32Guard&) = delete;

 private:
  bool previous_cpu_ = false;
  bool previous_cuda_ = false;
};

}  // namespace oml
