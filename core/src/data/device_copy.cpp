#include "oml/data/device_copy.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "oml/data/loader.h"

namespace oml::data {

DeviceCopier::DeviceCopier(c10::Device device) : device_(device) {
  if (!device.is_cuda()) return;
  // The device-generic interface of c10, which libtorch_cuda registers when it loads: this file
  // needs no CUDA header, and liboml_core no CUDA library.
  const c10::impl::VirtualGuardImpl guard(device.type());
  device_ = device.has_index() ? device : c10::Device(device.type(), guard.getDevice().index());
  stream_ = guard.getStreamFromGlobalPool(device_, /*isHighPriority=*/false);
}

void DeviceCopier::to_device(LoadedBatch& batch) const {
  if (!stream_) {
    batch.images = batch.images.to(device_);
    return;
  }
  const c10::impl::VirtualGuardImpl guard(device_.type());
  const c10::Stream compute = guard.getStream(device_);  // the stream the step runs on
  at::Tensor on_device;
  c10::Event copied(device_.type());
  {
    // Not ordered after the step's stream: that is the point. The copy writes only memory the
    // caching allocator hands out for the side stream, which no other stream's work still uses.
    const c10::StreamGuard on_side(*stream_);
    on_device = batch.images.to(device_, /*non_blocking=*/true);
    copied.record(*stream_);
  }
  copied.block(compute);
  // Allocated on the side stream, used on the step's: the caching allocator must not hand the
  // block out again before the step's stream is done with it.
  on_device.record_stream(compute);
  batch.images = std::move(on_device);
}

}  // namespace oml::data
