#include "oml/common/autocast.h"

#include <ATen/autocast_mode.h>

#include "oml/common/error.h"
#include "torch_compat.h"

namespace oml {

AutocastGuard::AutocastGuard(Precision precision, c10::Device device, bool cache_casts) {
  if (precision == Precision::fp32) return;
  cuda_ = device.is_cuda();
  OML_CHECK(cuda_ || device.is_cpu(), ConfigError, "precision ", precision_name(precision),
            ": autocast is available on the CPU and CUDA, not on ", device.str());
  OML_CHECK(cuda_ || precision == Precision::bf16, ConfigError,
            "precision 16 (float16 autocast) needs a GPU; on the CPU use precision: bf16");
  dtype_ = precision == Precision::bf16 ? c10::ScalarType::BFloat16 : c10::ScalarType::Half;
  const auto type = device_type();
  previous_enabled_ = torch_compat::autocast_enabled(type);
  previous_dtype_ = torch_compat::autocast_dtype(type);
  torch_compat::set_autocast_enabled(type, true);
  torch_compat::set_autocast_dtype(type, dtype_);
  previous_cache_ = at::autocast::is_autocast_cache_enabled();
  if (!cache_casts) at::autocast::set_autocast_cache_enabled(false);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cast weights are cached only while some autocast region is open; the outermost one
  // drops them, so the next step casts the updated float32 weights again.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  torch_compat::set_autocast_enabled(device_type(), previous_enabled_);
  torch_compat::set_autocast_dtype(device_type(), previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_);
}

Float32Guard::Float32Guard()
    : previous_cpu_(torch_compat::autocast_enabled(c10::DeviceType::CPU)),
      previous_cuda_(torch_compat::autocast_enabled(c10::DeviceType::CUDA)) {
  torch_compat::set_autocast_enabled(c10::DeviceType::CPU, false);
  torch_compat::set_autocast_enabled(c10::DeviceType::CUDA, false);
}

Float32Guard::~Float32Guard() {
  torch_compat::set_autocast_enabled(c10::DeviceType::CPU, previous_cpu_);
  torch_compat::set_autocast_enabled(c10::DeviceType::CUDA, previous_cuda_);
}

}  // namespace oml
