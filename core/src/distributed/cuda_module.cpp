#include "distributed/cuda_module.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <torch/version.h>

#include <cstring>
#include <filesystem>
#include <mutex>
#include <typeinfo>

#include "oml/common/error.h"

// OML_CUDA_MODULE is defined for this file only, in a build that makes the module
// (core/CMakeLists.txt): toggling it recompiles one file.

namespace oml::distributed::cuda_module {
namespace {

constexpr const char* kModuleFile = "liboml_core_cuda.so";

struct Module {
  void* handle = nullptr;
  MakeNcclGroupFn make_nccl_group = nullptr;
  GraphFunctions graphs;
};

std::mutex& load_mutex() {
  static std::mutex mutex;
  return mutex;
}

Module& the_module() {
  static Module module;
  return module;
}

template <class Fn>
Fn symbol(void* handle, const char* name, const std::string& where) {
  void* address = dlsym(handle, name);
  OML_CHECK(address != nullptr, RuntimeError, "CUDA module ", where, " lacks its entry point ", name,
            ": it is not an oml-cpp CUDA module of this build; rebuild oml-cpp (scripts/build.sh)");
  return reinterpret_cast<Fn>(address);
}

Module open_module() {
  const std::string where = path();
  // RTLD_GLOBAL: libtorch_cuda's symbols serve later libraries as if it had been linked.
  void* handle = dlopen(where.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw RuntimeError("cannot load oml-cpp's CUDA module " + where + ": " +
                       (reason ? reason : "unknown reason") +
                       " (it loads LibTorch's libtorch_cuda.so and the CUDA libraries of the torch wheel; "
                       "check that they are where this build found them, or on LD_LIBRARY_PATH)");
  }
  const int abi = symbol<AbiFn>(handle, kAbiSymbol, where)();
  OML_CHECK(abi == kCudaModuleAbi, RuntimeError, "CUDA module ", where, " has ABI ", abi,
            ", this liboml_core needs ", kCudaModuleAbi,
            ": they come from different builds; rebuild oml-cpp (scripts/build.sh)");
  const char* torch_version = symbol<TorchVersionFn>(handle, kTorchVersionSymbol, where)();
  OML_CHECK(std::strcmp(torch_version, TORCH_VERSION) == 0, RuntimeError, "CUDA module ", where,
            " was built against LibTorch ", torch_version, ", liboml_core against ", TORCH_VERSION,
            ": rebuild oml-cpp (scripts/build.sh)");
  // The module is loaded for good (its CUDA kernels are registered now), so the check that
  // follows can only report, not undo.
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  OML_CHECK(
      typeid(hooks) != typeid(at::CUDAHooksInterface), InternalError,
      "LibTorch's CUDA support was queried in this process before oml-cpp loaded its CUDA module ", where,
      ", so LibTorch keeps CUDA off until the process ends (a bug in oml-cpp: please report the command "
      "and config)");
  Module module;
  module.handle = handle;
  module.make_nccl_group = symbol<MakeNcclGroupFn>(handle, kMakeNcclGroupSymbol, where);
  module.graphs.create = symbol<GraphNewFn>(handle, kGraphNewSymbol, where);
  module.graphs.destroy = symbol<GraphDeleteFn>(handle, kGraphDeleteSymbol, where);
  module.graphs.capture = symbol<GraphCaptureFn>(handle, kGraphCaptureSymbol, where);
  module.graphs.replay = symbol<GraphReplayFn>(handle, kGraphReplaySymbol, where);
  return module;
}

}  // namespace

bool built() {
#ifdef OML_CUDA_MODULE
  return true;
#else
  return false;
#endif
}

std::string path() {
  Dl_info info{};
  // The module sits beside liboml_core (build/core/, or the installed lib/ folder).
  if (dladdr(reinterpret_cast<void*>(&path), &info) != 0 && info.dli_fname != nullptr)
    return (std::filesystem::path(info.dli_fname).parent_path() / kModuleFile).string();
  return kModuleFile;
}

bool driver_present() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) return false;
  dlclose(driver);
  return true;
}

void load() {
  // Callers check built() first: placement_for says what a CPU-only build means for the config.
  OML_ASSERT(built(), "cuda_module::load() in a build without the CUDA module");
  std::lock_guard<std::mutex> lock(load_mutex());
  Module& module = the_module();
  if (module.handle == nullptr) module = open_module();
}

bool loaded() {
  std::lock_guard<std::mutex> lock(load_mutex());
  return the_module().handle != nullptr;
}

MakeNcclGroupFn nccl_group_factory() {
  load();
  return the_module().make_nccl_group;
}

const GraphFunctions& graph_functions() {
  load();
  return the_module().graphs;
}

}  // namespace oml::distributed::cuda_module
