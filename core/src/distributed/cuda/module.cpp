// liboml_core_cuda.so: the CUDA half of a CUDA build, opened by src/distributed/cuda_module.cpp
// when a run asks for a GPU. It links LibTorch's libtorch_cuda (which loads the CUDA libraries
// and, as it loads, registers LibTorch's CUDA kernels and hooks) and holds the two things
// oml-cpp calls in it by name: the NCCL process group and CUDA graphs. Everything else on a GPU
// goes through LibTorch's dispatcher, which liboml_core reaches through libtorch_cpu.

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <chrono>
#include <exception>

#include "distributed/cuda/module_abi.h"

namespace abi = oml::distributed::cuda_module;

extern "C" __attribute__((visibility("default"))) int oml_cuda_module_abi() { return abi::kCudaModuleAbi; }

extern "C" __attribute__((visibility("default"))) const char* oml_cuda_module_torch_version() {
  return TORCH_VERSION;
}

extern "C" __attribute__((visibility("default"))) void oml_cuda_make_nccl_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms,
    c10::intrusive_ptr<oml::torch_compat::C10dBackend>& out) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = std::chrono::milliseconds(timeout_ms);
  out = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

namespace {

// A graph and the memory pool its capture allocates from, named here (not by capture_begin) so
// that a failed capture's pool can still be released.
struct Graph : at::cuda::CUDAGraph {
  c10::MempoolId_t pool = at::cuda::graph_pool_handle();

  // After a capture that did not end cleanly: capture_begin put the random generators it
  // registered (the default CUDA generator always) into capture mode, and only a clean
  // capture_end takes them out. Left so, the next eager random op (dropout) would fail
  // PyTorch's check that no offset is taken outside a capture.
  void leave_generators_capture_mode() {
    for (auto& [state, increment] : captured_generator_states_) state->capturing_ = false;
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) void* oml_cuda_graph_new() { return new Graph(); }

extern "C" __attribute__((visibility("default"))) void oml_cuda_graph_delete(void* graph) {
  delete static_cast<Graph*>(graph);
}

extern "C" __attribute__((visibility("default"))) void oml_cuda_graph_capture(void* handle,
                                                                              void (*work)(void* context),
                                                                              void* context) {
  Graph& graph = *static_cast<Graph*>(handle);
  const c10::MempoolId_t pool = graph.pool;
  const c10::DeviceIndex device = c10::cuda::current_device();
  // Thread-local: only this thread's unsafe calls (a synchronisation, a blocking copy) break the
  // capture; the loader's workers may pin memory meanwhile.
  graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
  std::exception_ptr failed;
  try {
    work(context);
  } catch (...) {
    failed = std::current_exception();
  }
  bool ended = false;
  try {
    graph.capture_end();
    ended = true;
  } catch (...) {
    if (!failed) failed = std::current_exception();
  }
  if (!failed) return;
  // CUDAGraph::capture_end stops routing allocations to the graph's pool only once the stream's
  // capture ended cleanly; after an invalidated capture (an operation CUDA refused) that is left
  // to do, and the pool's memory is handed back either way, so a failed capture costs nothing.
  if (!ended) {
    graph.leave_generators_capture_mode();
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
    } catch (...) {
    }
    c10::cuda::CUDACachingAllocator::releasePool(device, pool);
  }
  std::rethrow_exception(failed);
}

extern "C" __attribute__((visibility("default"))) void oml_cuda_graph_replay(void* graph) {
  static_cast<Graph*>(graph)->replay();
}

// The signatures above are the ones cuda_module.cpp looks up.
static_assert(std::is_same_v<decltype(&oml_cuda_module_abi), abi::AbiFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_module_torch_version), abi::TorchVersionFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_make_nccl_group), abi::MakeNcclGroupFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_graph_new), abi::GraphNewFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_graph_delete), abi::GraphDeleteFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_graph_capture), abi::GraphCaptureFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_graph_replay), abi::GraphReplayFn>);
