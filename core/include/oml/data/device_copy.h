#pragma once
// Batches onto a GPU without making the GPU wait for them (docs/training.md#feeding-a-gpu).
//
// A copy queued on the stream that runs the training step waits behind everything queued there
// before it: the previous step's backward and optimizer. DeviceCopier queues a batch's copy on a
// stream of its own instead, so that it runs while the device is still busy with the previous
// step, and makes the step's stream wait for the copy only where the batch is first used. With
// the loader's batches in page-locked memory (LoaderOptions::pin_memory) the copy is an
// asynchronous DMA transfer that the host does not wait for either; from pageable memory CUDA
// stages it through a buffer first.
//
//   const data::DeviceCopier copier(ctx.device);          // once per run
//   while (auto batch = loader.next()) {
//     copier.to_device(*batch);                            // images now on ctx.device
//     step(*batch);
//   }
//
// On the CPU (or any device without streams) to_device leaves the batch as it is.

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <optional>

namespace oml::data {

struct LoadedBatch;

class DeviceCopier {
 public:
  /// A copier to `device`. For a CUDA device, LibTorch's CUDA half must be loaded already (the
  /// run's placement loads it: distributed::placement_for); the side stream comes from its pool.
  explicit DeviceCopier(c10::Device device);

  /// Moves `batch.images` (the model's input) to the device. On a GPU: queued on the side stream,
  /// with the current stream made to wait for it and the memory tied to the current stream, so
  /// that it is not reused while the step still reads it. The labels and indices stay in host
  /// memory: the step checks labels there, and copies the few bytes it needs itself.
  void to_device(LoadedBatch& batch) const;

  /// Whether copies run on a stream of their own (a CUDA device).
  bool side_stream() const { return stream_.has_value(); }

 private:
  c10::Device device_;
  std::optional<c10::Stream> stream_;
};

}  // namespace oml::data
