#pragma once
// Numbers a training step computes on its device (the loss, a loss's log values), read on the
// host later without making the host wait for the device where they are taken.
//
//   PendingScalars values({loss, accuracy});  // queues one copy to host memory, returns at once
//   ...                                        // queue the next step's work
//   std::vector<double> v = values.read();     // waits for that copy only, not for later work
//
// On CUDA the values are copied (non-blocking) into pinned host memory and an event is recorded
// after the copy; read() waits for that event, which is a wait for the work queued before the
// values were taken, never for work queued after them (a stream or device synchronisation would
// be). Tensors already on the CPU are read as they are: reading them is no synchronisation.

#include <c10/core/Event.h>
#include <torch/types.h>

#include <memory>
#include <vector>

namespace oml {

class PendingScalars {
 public:
  PendingScalars() = default;
  /// Takes `values`: each a tensor of one element (any dtype, read as double), each on the CPU or
  /// on one device shared by all that are not. UsageError for a tensor with another number of
  /// elements, or for values on two different devices.
  explicit PendingScalars(const std::vector<at::Tensor>& values);
  PendingScalars(PendingScalars&&) noexcept = default;
  PendingScalars& operator=(PendingScalars&&) noexcept = default;

  /// The values, in the order given, as doubles. The first call waits for the device's copy
  /// (CUDA: the event recorded after it); later calls return the same numbers.
  const std::vector<double>& read();
  std::size_t size() const { return slots_.size(); }

 private:
  /// Where value i is: host_values_[index] (a CPU tensor, read when given) or device_copy_[index].
  struct Slot {
    bool on_host = true;
    int64_t index = 0;
  };
  std::vector<Slot> slots_;
  std::vector<double> host_values_;
  /// The values on the device as double [n]: on CUDA already copied into pinned host memory
  /// (complete once copy_done_ is), on another device still there (copied by read()).
  at::Tensor device_copy_;
  std::unique_ptr<c10::Event> copy_done_;  ///< CUDA: recorded after the copy
  std::vector<double> values_;
  bool read_ = false;
};

}  // namespace oml
