#include "oml/losses/host_labels.h"

#include <ATen/ATen.h>

#include "oml/common/error.h"

namespace oml::losses {
namespace {
thread_local const HostLabels* innermost = nullptr;
}  // namespace

HostLabels::HostLabels(const at::Tensor& on_device, const at::Tensor& on_host)
    : on_device_(on_device), on_host_(on_host.contiguous()), outer_(innermost) {
  OML_CHECK(on_host_.device().is_cpu() && on_host_.sizes() == on_device_.sizes(), InternalError,
            "HostLabels: the host copy must be a CPU tensor of the labels' shape, got ", on_host_.sizes(),
            " on ", on_host_.device(), " for ", on_device_.sizes());
  innermost = this;
}

HostLabels::~HostLabels() { innermost = outer_; }

at::Tensor host_labels(const at::Tensor& labels) {
  for (const HostLabels* d = innermost; d != nullptr; d = d->outer_) {
    if (d->on_device_.is_same(labels)) return d->on_host_;
  }
  return labels.to(at::kCPU).contiguous();
}

at::Tensor to_device_indices(const at::Tensor& values, c10::Device device) {
  if (device.is_cpu()) return values;
  // Page-locked on a GPU: a copy from pageable memory would make the host wait.
  const at::Tensor staged = device.is_cuda() ? values.pin_memory() : values;
  return staged.to(device, /*non_blocking=*/device.is_cuda());
}

at::Tensor to_device_indices(const std::vector<int64_t>& values, c10::Device device) {
  return to_device_indices(at::tensor(values, at::TensorOptions().dtype(at::kLong)), device);
}

}  // namespace oml::losses
