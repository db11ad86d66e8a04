#pragma once
// A batch's labels in host memory, for the miners that list triplets on the host.
//
// The pipelines copy each batch's labels to the device from the loader's host memory. A miner
// whose triplets depend on the labels alone (all_triplets, triplets_with_memory's listing,
// hard_cluster's label groups) works on the host; reading the labels back from a GPU would make
// the step wait for it. So the step declares the host copy it has, for the time of the loss:
//
//   const losses::HostLabels declared(labels, batch.labels);  // the device tensor, its host copy
//   criterion->forward(embeddings, labels);
//
// and such a miner takes host_labels(labels): the declared copy when `labels` is the very tensor
// declared (not another tensor of the same values, not a slice), else labels.to(kCPU) — so a
// loss called without a declaration (a test, a plugin's pipeline) computes the same, reading
// back. Declarations are per thread and nest (the innermost one of a tensor counts). The caller
// vouches that the two hold the same values.
//
// Index lists made on the host go back with to_device_indices: from page-locked memory and
// without blocking on a GPU, so that nothing in the step waits for the device. Such a copy must
// not be captured into a CUDA graph (a replay would copy whatever the page-locked buffer then
// holds), and is not: a captured step's labels live on the device only, so it declares no host
// copy, host_labels reads back, CUDA refuses that inside a capture, and the step runs eagerly
// (docs/training.md#cuda-graphs).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace oml::losses {

class HostLabels {
 public:
  /// Declares `on_host` (a CPU tensor) as the host copy of `on_device`, until destruction.
  HostLabels(const at::Tensor& on_device, const at::Tensor& on_host);
  ~HostLabels();
  HostLabels(const HostLabels&) = delete;
  HostLabels& operator=(const HostLabels&) = delete;

 private:
  at::Tensor on_device_;
  at::Tensor on_host_;
  const HostLabels* outer_;  ///< the declaration this one nests in (this thread's), or null
  friend at::Tensor host_labels(const at::Tensor& labels);
};

/// `labels` in host memory (contiguous int64 as given): a declared copy, else read back.
at::Tensor host_labels(const at::Tensor& labels);

/// `values` (int64) on `device`; on a GPU copied from page-locked memory without blocking (the
/// copy is ordered before the work queued after it, and the host does not wait).
at::Tensor to_device_indices(const std::vector<int64_t>& values, c10::Device device);
/// The same for a CPU tensor.
at::Tensor to_device_indices(const at::Tensor& values, c10::Device device);

}  // namespace oml::losses
