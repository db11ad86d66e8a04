#include "oml/common/runtime.h"

#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "oml/common/logging.h"
#include "torch_compat.h"

namespace oml {

std::string blas_backend() {
  // The wheel's LibTorch has MKL linked into libtorch_cpu and calls it directly, whatever
  // other BLAS (OpenBLAS for Debian's Faiss) the process loads.
  if (at::hasMKL()) return "MKL (linked into LibTorch)";
  // Debian's LibTorch calls the Fortran BLAS symbol sgemm_; find the library that provides it.
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  if (sgemm == nullptr) return "unknown (no BLAS sgemm_ loaded)";
  Dl_info info{};
  if (dladdr(sgemm, &info) == 0 || info.dli_fname == nullptr) return "unknown";
  std::error_code ec;
  std::string path = std::filesystem::canonical(info.dli_fname, ec).string();
  if (ec) path = info.dli_fname;
  const bool is_openblas = dlsym(RTLD_DEFAULT, "openblas_get_num_threads") != nullptr ||
                           path.find("openblas") != std::string::npos;
  if (is_openblas) return "OpenBLAS (" + path + ")";
  if (path.find("mkl") != std::string::npos) return "MKL (" + path + ")";
  if (path.find("blis") != std::string::npos) return "BLIS (" + path + ")";
  if (path.find("atlas") != std::string::npos) return "ATLAS (" + path + ")";
  if (path.find("/blas/") != std::string::npos) return "reference BLAS (" + path + ")";
  return "unknown (" + path + ")";
}

bool using_reference_blas() { return blas_backend().rfind("reference", 0) == 0; }

void warn_if_reference_blas() {
  static bool warned = false;
  if (warned) return;
  warned = true;
  if (using_reference_blas()) {
    log::warn("LibTorch is running on the " + blas_backend() +
              ", about 25x slower than OpenBLAS for matrix multiplies; install "
              "libopenblas0-pthread (scripts/setup.sh does) to switch libblas.so.3 to OpenBLAS");
  }
}

bool tune_allocator(AllocatorUse use) {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_"}) {
    if (std::getenv(name)) return false;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::string(tunables).find("glibc.malloc.") != std::string::npos) return false;
  constexpr int kMmapThreshold = 32 << 20;  // glibc refuses more (half its 64 MB arena heap)
  constexpr int kTrimThreshold = 64 << 20;
  // Setting either disables glibc's dynamic adjustment of both (mallopt(3)).
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1) {
    return false;
  }
  // `training`: no block mapped on its own (where the heap cannot grow, glibc still maps more
  // heap); `general`: glibc's default limit on such blocks.
  constexpr int kDefaultMmapMax = 65536;
  return mallopt(M_MMAP_MAX, use == AllocatorUse::training ? 0 : kDefaultMmapMax) == 1;
}

void configure_library_logging(const char* program, bool verbose) {
  torch_compat::set_library_log_level(program, verbose);
}

namespace {

using GetThreads = int (*)();
using SetThreads = void (*)(int);
using SetLocalThreads = int (*)(int);

// OpenBLAS's thread-count functions, when OpenBLAS is the loaded BLAS.
std::pair<GetThreads, SetThreads> openblas_threads() {
  static const auto functions =
      std::make_pair(reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")),
                     reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")));
  return functions;
}

// MKL's per-thread setting (exported by the wheel's libtorch_cpu), when MKL is loaded: its C
// entry point (mkl_set_num_threads_local is the Fortran one, which takes a pointer).
SetLocalThreads mkl_local_threads() {
  static const auto function =
      reinterpret_cast<SetLocalThreads>(dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
  return function;
}

}  // namespace

SingleThreadedBlas::SingleThreadedBlas() {
  if (const auto set_local = mkl_local_threads()) {
    previous_mkl_ = set_local(1);
    mkl_set_ = true;
  }
  const auto [get, set] = openblas_threads();
  if (get == nullptr || set == nullptr) return;
  const int current = get();
  if (current <= 1) return;
  previous_ = current;
  set(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ > 0) openblas_threads().second(previous_);
  if (mkl_set_) mkl_local_threads()(previous_mkl_);
}

namespace {

// OMP_NUM_THREADS as PyTorch reads it: a positive integer, else unset (0).
int omp_num_threads_variable() {
  const char* value = std::getenv("OMP_NUM_THREADS");
  if (value == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return (end != value && *end == '\0' && n > 0 && n <= 4096) ? static_cast<int>(n) : 0;
}

}  // namespace

int configure_threads(int requested, int local_ranks) {
  int threads = requested;
  if (threads <= 0) threads = omp_num_threads_variable();
  if (threads <= 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / std::max(1, local_ranks));
  }
  torch::set_num_threads(threads);
  return threads;
}

}  // namespace oml
