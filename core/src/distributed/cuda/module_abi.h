#pragma once
// What liboml_core and its CUDA module (liboml_core_cuda.so, src/distributed/cuda/module.cpp)
// agree on: the module's exported entry points, looked up with dlsym by cuda_module.cpp. Bump
// kCudaModuleAbi when a signature here changes; a module of another ABI is refused with its path.

#include <c10/util/intrusive_ptr.h>

#include <cstdint>

#include "torch_compat.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace oml::distributed::cuda_module {

inline constexpr int kCudaModuleAbi = 2;

/// oml_cuda_module_abi(): the kCudaModuleAbi the module was compiled with.
using AbiFn = int (*)();
inline constexpr const char* kAbiSymbol = "oml_cuda_module_abi";

/// oml_cuda_module_torch_version(): TORCH_VERSION of the LibTorch the module was compiled
/// against ("2.11.0"); it must be the one liboml_core was compiled against.
using TorchVersionFn = const char* (*)();
inline constexpr const char* kTorchVersionSymbol = "oml_cuda_module_torch_version";

/// oml_cuda_make_nccl_group(store, rank, size, timeout_ms, out): sets `out` to a c10d NCCL
/// process group of `size` ranks rendezvousing through `store`. Throws what c10d throws.
using MakeNcclGroupFn = void (*)(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 int64_t timeout_ms, c10::intrusive_ptr<torch_compat::C10dBackend>& out);
inline constexpr const char* kMakeNcclGroupSymbol = "oml_cuda_make_nccl_group";

/// CUDA graphs (distributed/cuda_graph.cpp): an at::cuda::CUDAGraph behind an opaque handle.
/// oml_cuda_graph_new(): a new, empty graph (delete it with oml_cuda_graph_delete).
using GraphNewFn = void* (*)();
inline constexpr const char* kGraphNewSymbol = "oml_cuda_graph_new";
/// oml_cuda_graph_delete(graph): frees the graph and the memory pool of its captured work.
using GraphDeleteFn = void (*)(void* graph);
inline constexpr const char* kGraphDeleteSymbol = "oml_cuda_graph_delete";
/// oml_cuda_graph_capture(graph, work): captures what `work` queues on the current stream (not
/// the default stream) into `graph`, in cudaStreamCaptureModeThreadLocal (other threads, such
/// as the loader's workers pinning memory, are not restricted); nothing runs. When `work` or the
/// capture throws, the capture is ended and its memory released, and the error is rethrown:
/// `graph` is then empty and must be deleted.
using GraphCaptureFn = void (*)(void* graph, void (*work)(void* context), void* context);
inline constexpr const char* kGraphCaptureSymbol = "oml_cuda_graph_capture";
/// oml_cuda_graph_replay(graph): launches the captured work on the current stream.
using GraphReplayFn = void (*)(void* graph);
inline constexpr const char* kGraphReplaySymbol = "oml_cuda_graph_replay";

}  // namespace oml::distributed::cuda_module
