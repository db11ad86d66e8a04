// Process-level settings: the BLAS check every command runs at start-up, thread counts.
#include <dlfcn.h>
#include <torch/torch.h>

#include "oml/common/runtime.h"
#include "support/support.h"

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

TEST_CASE("The allocator is tuned unless the user set glibc's malloc variables", "[runtime]") {
  CHECK(oml::tune_allocator());
  ::setenv("MALLOC_TRIM_THRESHOLD_", "1048576", 1);
  CHECK_FALSE(oml::tune_allocator());
  ::unsetenv("MALLOC_TRIM_THRESHOLD_");
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
