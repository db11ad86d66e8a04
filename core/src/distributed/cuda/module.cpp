// liboml_core_cuda.so: the CUDA half of a CUDA build, opened by src/distributed/cuda_module.cpp
// when a run asks for a GPU. It links LibTorch's libtorch_cuda (which loads the CUDA libraries
// and, as it loads, registers LibTorch's CUDA kernels and hooks) and holds the one thing
// oml-cpp calls in it by name: the NCCL process group. Everything else on a GPU goes through
// LibTorch's dispatcher, which liboml_core reaches through libtorch_cpu.

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <chrono>

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

// The signatures above are the ones cuda_module.cpp looks up.
static_assert(std::is_same_v<decltype(&oml_cuda_module_abi), abi::AbiFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_module_torch_version), abi::TorchVersionFn>);
static_assert(std::is_same_v<decltype(&oml_cuda_make_nccl_group), abi::MakeNcclGroupFn>);
