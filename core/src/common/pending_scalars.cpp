#include "oml/common/pending_scalars.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "oml/common/error.h"
#include "torch_compat.h"

namespace oml {

PendingScalars::PendingScalars(const std::vector<at::Tensor>& values) {
  std::vector<at::Tensor> on_device;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const at::Tensor& value = values[i];
    OML_CHECK(
        value.defined() && value.numel() == 1, UsageError, "PendingScalars: value ", i,
        " must be a tensor of one element, got ",
        value.defined() ? std::to_string(value.numel()) + " elements" : std::string("an undefined tensor"));
    if (value.device().is_cpu()) {
      slots_.push_back({true, static_cast<int64_t>(host_values_.size())});
      host_values_.push_back(value.item<double>());  // host memory: no synchronisation
      continue;
    }
    OML_CHECK(on_device.empty() || value.device() == on_device.front().device(), UsageError,
              "PendingScalars: value ", i, " is on ", value.device().str(), ", an earlier one on ",
              on_device.front().device().str(), "; the values must share one device");
    slots_.push_back({false, static_cast<int64_t>(on_device.size())});
    on_device.push_back(value.detach().reshape({1}).to(at::kDouble));
  }
  if (on_device.empty()) return;
  const at::Tensor stacked = at::cat(on_device);
  const c10::Device device = stacked.device();
  if (!device.is_cuda()) {
    device_copy_ = stacked;  // read() copies it (a blocking copy on such a device)
    return;
  }
  // A blocking copy to pageable memory would wait for the whole stream (what this class avoids);
  // into pinned memory the copy is queued behind the work that computes the values.
  device_copy_ = at::empty({stacked.numel()}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
  device_copy_.copy_(stacked, /*non_blocking=*/true);
  copy_done_ = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
  copy_done_->record(c10::impl::getDeviceGuardImpl(device.type())->getStream(device));
}

const std::vector<double>& PendingScalars::read() {
  if (read_) return values_;
  if (copy_done_) torch_compat::synchronize_event(*copy_done_);
  if (device_copy_.defined() && !device_copy_.device().is_cpu()) device_copy_ = device_copy_.to(at::kCPU);
  values_.reserve(slots_.size());
  for (const Slot& slot : slots_) {
    values_.push_back(slot.on_host ? host_values_[static_cast<std::size_t>(slot.index)]
                                   : device_copy_[slot.index].item<double>());
  }
  read_ = true;
  return values_;
}

}  // namespace oml
