#pragma once
// LibTorch's CUDA half, loaded only when a run asks for a GPU.
//
// The torch wheel's LibTorch is a CPU library (libtorch_cpu) and a CUDA library (libtorch_cuda,
// which brings cuBLAS, cuDNN, NCCL, ...: ~350 MB resident even on a machine without a GPU).
// liboml_core links the CPU half only. The CUDA half comes with the CUDA module,
// liboml_core_cuda.so beside liboml_core (src/distributed/cuda/module.cpp), which load() opens
// with dlopen: loading it registers LibTorch's CUDA kernels and hooks, after which CUDA tensors
// work as in a binary linked against libtorch_cuda, and it holds the NCCL process group.
// distributed::placement_for() calls load() when `accelerator:` resolves to cuda, before any
// tensor of the run exists.
//
// LibTorch settles on its CUDA hooks the first time anything asks for them
// (torch::cuda::is_available, torch::manual_seed, at::hasCUDA, ...): asked before load(), CUDA
// stays off for the whole process. load() detects that and says so instead of leaving a run on
// a CPU it did not ask for. Binaries that link libtorch_cuda themselves (the GPU tests) are
// unaffected: the module then finds it loaded. The module also holds CUDA graphs
// (distributed/cuda_graph.cpp), LibTorch's at::cuda::CUDAGraph being in libtorch_cuda.

#include <string>

#include "distributed/cuda/module_abi.h"

namespace oml::distributed::cuda_module {

/// True when this build has a CUDA module (it was built against a CUDA LibTorch).
bool built();

/// The module's path: liboml_core_cuda.so in the folder liboml_core was loaded from.
std::string path();

/// True when the NVIDIA driver (libcuda.so.1) can be loaded, found without loading any of
/// LibTorch's CUDA half: `accelerator: auto` looks for a GPU only where a driver is installed.
bool driver_present();

/// Opens the module once per process; later calls return at once. Only for builds that have
/// it (built(): an InternalError otherwise). Throws RuntimeError naming the module's path when it cannot be
/// loaded (the loader's reason) or is of another build (ABI or LibTorch version), and InternalError when CUDA
/// was queried in this process before the module was loaded (see above).
void load();

/// True once load() succeeded.
bool loaded();

/// The module's constructor of c10d NCCL process groups (module_abi.h), load()ing it first.
MakeNcclGroupFn nccl_group_factory();

/// The module's CUDA graph entry points (module_abi.h).
struct GraphFunctions {
  GraphNewFn create = nullptr;
  GraphDeleteFn destroy = nullptr;
  GraphCaptureFn capture = nullptr;
  GraphReplayFn replay = nullptr;
};

/// The module's CUDA graph functions, load()ing it first.
const GraphFunctions& graph_functions();

}  // namespace oml::distributed::cuda_module
