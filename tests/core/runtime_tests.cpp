// Process-level settings: the BLAS check every command runs at start-up, thread counts.
#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>

#include "oml/common/determinism.h"
#include "oml/common/runtime.h"
#include "support/support.h"

namespace runtime_tests {

using Catch::Matchers::StartsWith;

TEST_CASE("LibTorch runs on a fast BLAS: MKL in the wheel's, OpenBLAS in Debian's once set up", "[runtime]") {
  // The wheel's LibTorch has MKL linked in; Debian's calls libblas.so.3, which
  // libopenblas0-pthread (scripts/setup.sh) takes over. The commands warn when the slow
  // reference BLAS is in use instead.
  const std::string backend = oml::blas_backend();
  INFO(backend);
  CHECK_THAT(backend, StartsWith(at::hasMKL() ? "MKL" : "OpenBLAS"));
  CHECK_FALSE(oml::using_reference_blas());
}

TEST_CASE("Intra-op threads default to cores divided by local ranks", "[runtime]") {
  CHECK(oml::configure_threads(3) == 3);
  CHECK(torch::get_num_threads() == 3);
  const int all = oml::configure_threads(0, 1);
  CHECK(all >= 1);
  CHECK(oml::configure_threads(0, 1000) == 1);
  oml::configure_threads(all);
}

namespace {
// How many bytes malloc(bytes) adds to the blocks glibc maps on their own (mallinfo2's hblkhd).
std::size_t mapped_on_its_own(std::size_t bytes) {
  const std::size_t before = mallinfo2().hblkhd;
  void* block = std::malloc(bytes);
  REQUIRE(block != nullptr);
  const std::size_t after = mallinfo2().hblkhd;
  std::free(block);
  return after - before;
}
}  // namespace

TEST_CASE("The allocator is tuned unless the user set glibc's malloc variables", "[runtime]") {
  constexpr std::size_t kMB = std::size_t{1} << 20;
  // Free memory already in the heap serves a request whatever the thresholds say (earlier tests
  // in this process leave some): the large block asks for more than all of it.
  const std::size_t large = std::max(48 * kMB, mallinfo2().fordblks + kMB);  // ViT-S/16's fp32 MLP: 38 MB
  CHECK(oml::tune_allocator());
  CHECK(mapped_on_its_own(30 * kMB) == 0);
  CHECK(mapped_on_its_own(large) >= large);
  CHECK(oml::tune_allocator(oml::AllocatorUse::training));
  CHECK(mapped_on_its_own(std::max(large, mallinfo2().fordblks + kMB)) == 0);
  CHECK(oml::tune_allocator());  // as the other tests' commands run
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_"}) {
    const oml::test::ScopedEnv user_setting(name, "1048576");
    CHECK_FALSE(oml::tune_allocator());
  }
  const oml::test::ScopedEnv user_tunables("GLIBC_TUNABLES", "glibc.malloc.mmap_max=0");
  CHECK_FALSE(oml::tune_allocator(oml::AllocatorUse::training));
}

TEST_CASE("SingleThreadedBlas runs OpenBLAS on one thread while it lives", "[runtime]") {
  using GetThreads = int (*)();
  using SetThreads = void (*)(int);
  const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  REQUIRE(get != nullptr);  // scripts/setup.sh installs OpenBLAS (the first test here says so)
  REQUIRE(set != nullptr);
  const int before = get();
  set(2);
  {
    const oml::SingleThreadedBlas guard;
    CHECK(get() == 1);
    // Multiplies still work and give the same result.
    const auto a = torch::arange(12, torch::kFloat).reshape({3, 4});
    CHECK(torch::equal(torch::mm(a, a.t()),
                       torch::mm(a.to(torch::kDouble), a.t().to(torch::kDouble)).to(torch::kFloat)));
  }
  CHECK(get() == 2);
  set(before);
}

TEST_CASE("SingleThreadedBlas runs MKL on one thread in the thread that holds it", "[runtime]") {
  using GetMax = int (*)();
  const auto get_max = reinterpret_cast<GetMax>(dlsym(RTLD_DEFAULT, "MKL_Get_Max_Threads"));
  if (get_max == nullptr) {
    CHECK_FALSE(at::hasMKL());  // Debian's LibTorch: no MKL to set
    return;
  }
  // LibTorch sizes a thread's OpenMP pool from MKL's count at the thread's first parallel op:
  // one before the guard, as in the commands (configure_threads at start-up).
  const auto a = torch::arange(12, torch::kFloat).reshape({3, 4});
  const int before = get_max();
  {
    const oml::SingleThreadedBlas guard;
    CHECK(get_max() == 1);
    CHECK(torch::equal(torch::mm(a, a.t()),
                       torch::mm(a.to(torch::kDouble), a.t().to(torch::kDouble)).to(torch::kFloat)));
  }
  CHECK(get_max() == before);
}

TEST_CASE("Deterministic mode turns on ATen's deterministic algorithms, cuDNN's and cuBLAS's workspace",
          "[runtime][determinism]") {
  auto& context = at::globalContext();
  const bool benchmark = context.benchmarkCuDNN();
  oml::test::ScopedEnv workspace("CUBLAS_WORKSPACE_CONFIG", std::nullopt);
  context.setBenchmarkCuDNN(true);
  // max_unpool2d has no deterministic kernel on the CPU: ATen refuses it in deterministic mode.
  const auto unpool = [] {
    return torch::max_unpool2d(torch::ones({1, 1, 2, 2}), torch::zeros({1, 1, 2, 2}, torch::kLong), {4, 4});
  };
  CHECK_NOTHROW(unpool());

  oml::use_deterministic_algorithms(/*warn_only=*/false);
  auto state = oml::determinism_state();
  CHECK(state.algorithms);
  CHECK_FALSE(state.warn_only);
  CHECK(state.cudnn_deterministic);
  CHECK_FALSE(state.cudnn_benchmark);
  CHECK(state.cublas_workspace_config == ":4096:8");
  CHECK(oml::describe(state) ==
        "deterministic algorithms on (errors), cuDNN deterministic, cuDNN benchmark off, "
        "CUBLAS_WORKSPACE_CONFIG=:4096:8");
  CHECK_THROWS_WITH(unpool(), Catch::Matchers::Contains("does not have a deterministic implementation"));

  // "warn": the operation runs (ATen warns); a workspace setting the user exported stays.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);  // the guard above puts the user's value back
  oml::use_deterministic_algorithms(/*warn_only=*/true);
  state = oml::determinism_state();
  CHECK(state.algorithms);
  CHECK(state.warn_only);
  CHECK(state.cublas_workspace_config == ":16:8");
  CHECK_NOTHROW(unpool());

  context.setDeterministicAlgorithms(false, false);
  context.setDeterministicCuDNN(false);
  context.setBenchmarkCuDNN(benchmark);
}

}  // namespace runtime_tests
