#pragma once
// A CUDA graph: the kernels some code queues on a GPU, captured once and then launched again as
// one unit (torch.cuda.CUDAGraph). A replay costs the host one launch instead of one per kernel,
// and reads and writes the very memory the capture used: inputs are copied into the tensors the
// captured code read, outputs are read from the tensors it wrote.
//
//   distributed::CudaGraph graph(device);
//   graph.run([&] { step(inputs); });      // warm-up, eagerly, on the graph's stream
//   graph.capture([&] { out = step(inputs); });  // queues nothing: records
//   inputs.copy_(next);  graph.replay();   // `out` now holds next's result
//
// Work runs and is captured on a stream of the graph's own (CUDA captures no work on the
// default stream), ordered after the work queued before on the caller's stream and before what
// the caller queues next. Capture is thread-local: another thread's CUDA calls (the loader's
// workers pinning memory) neither break it nor are captured. The code captured must not
// synchronise with the host, copy from pageable memory or allocate outside LibTorch's caching
// allocator: CUDA refuses such an operation during capture, capture() throws, and the graph is
// left empty. A copy from page-locked host memory is not refused but captured as it is: every
// replay copies the same host bytes again, so host data that changes goes in through a device
// tensor the caller fills before each replay.
//
// Lives in LibTorch's CUDA half: the CUDA module (cuda_module.h) holds the at::cuda::CUDAGraph.

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <string>

namespace oml::distributed {

class CudaGraph {
 public:
  /// An empty graph on `device`, a CUDA device of a build with the CUDA module, which placement_for
  /// has loaded already (an InternalError otherwise).
  explicit CudaGraph(c10::Device device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Runs `work` eagerly on the graph's stream (what is to be captured should first run like
  /// this a few times: cuDNN and cuBLAS settle their choices and workspaces on that stream).
  void run(const std::function<void()>& work);

  /// Records what `work` queues on the graph's stream; nothing runs. Replaces an earlier
  /// capture. Rethrows what `work` throws, or CUDA's refusal of an operation as a c10::Error;
  /// the graph is then empty (captured() is false) and may capture again.
  void capture(const std::function<void()>& work);

  bool captured() const { return graph_ != nullptr; }

  /// Launches the captured work on the caller's current stream. Only after a capture.
  void replay();

 private:
  void release();

  c10::Device device_;
  c10::Stream stream_;
  void* graph_ = nullptr;  ///< the CUDA module's handle (cuda_module.h)
};

/// Whether this build can make CUDA graphs on `device`: "" when it can, else why not (the device
/// is not a GPU, or this build has no CUDA module).
std::string cuda_graph_unavailable(c10::Device device);

}  // namespace oml::distributed
