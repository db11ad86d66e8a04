#include "oml/common/autocast.h"

#include <ATen/autocast_mode.h>

#include "oml/common/error.h"

namespace oml {

AutocastGuard::AutocastGuard(config::Precision precision, c10::Device device) {
  if (precision == config::Precision::fp32) return;
  cuda_ = device.is_cuda();
  OML_CHECK(cuda_ || device.is_cpu(), ConfigError, "precision ", config::precision_name(precision),
            ": autocast is available on the CPU and CUDA, not on ", device.str());
  OML_CHECK(cuda_ || precision == config::Precision::bf16, ConfigError,
            "precision 16 (float16 autocast) needs a GPU; on the CPU use precision: bf16");
  dtype_ = precision == config::Precision::bf16 ? c10::ScalarType::BFloat16 : c10::ScalarType::Half;
  if (cuda_) {
    previous_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype_);
  } else {
    previous_enabled_ = at::autocast::is_cpu_enabled();
    previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype_);
  }
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cast weights are cached only while some autocast region is open; the outermost one
  // drops them, so the next step casts the updated float32 weights again.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(previous_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
  } else {
    at::autocast::set_cpu_enabled(previous_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  }
}

Float32Guard::Float32Guard()
    : previous_cpu_(at::autocast::is_cpu_enabled()), previous_cuda_(at::autocast::is_enabled()) {
  at::autocast::set_cpu_enabled(false);
  at::autocast::set_enabled(false);
}

Float32Guard::~Float32Guard() {
  at::autocast::set_cpu_enabled(previous_cpu_);
  at::autocast::set_enabled(previous_cuda_);
}

}  // namespace oml
