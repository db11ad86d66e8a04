// Where a rank computes (distributed::placement_for) and the CUDA module behind it
// (src/distributed/cuda_module.h): a CPU run never loads LibTorch's CUDA half, a CUDA request
// loads it and then works as if it had been linked, and a process that asked LibTorch about
// CUDA too early is told so.
//
// Whether libtorch_cuda is loaded is a property of the whole process, and LibTorch settles its
// CUDA hooks once per process: so each case that loads the module runs in a fresh process of
// this test binary (a hidden test case, run by the visible one through /proc/self/exe).
#include <torch/cuda.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "distributed/cuda_module.h"
#include "oml/common/error.h"
#include "oml/distributed/device.h"
#include "oml/distributed/process_group.h"
#include "support/support.h"

namespace cuda_module_tests {

using Catch::Matchers::Contains;
namespace dist = oml::distributed;
using oml::config::Accelerator;

namespace {

// Used by the cases of a CUDA build only (a CPU-only LibTorch has no CUDA half to load).
#if OML_TORCH_CUDA
bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/" + library) != std::string::npos) return true;
  return false;
}

/// Runs this binary's hidden test case `tag` in a process of its own (no GPU visible) and
/// checks that it passed.
void check_hidden_case_passes(const std::string& tag) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto r =
      oml::test::run("CUDA_VISIBLE_DEVICES= " + oml::test::quote(self) + " " + oml::test::quote(tag));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("All tests passed"));
}
#endif

}  // namespace

TEST_CASE("accelerator cpu uses Gloo on the CPU and loads no CUDA", "[ddp][cuda_module]") {
  const auto cpu = dist::placement_for(Accelerator::cpu, dist::World{});
  CHECK(cpu.backend == "gloo");
  CHECK(cpu.device.is_cpu());
  CHECK_FALSE(dist::cuda_module::loaded());
#if OML_TORCH_CUDA
  CHECK(dist::cuda_module::built());
  // A CUDA build has c10d's NCCL process group, in the module.
  CHECK(dist::available_backends() == std::vector<std::string>{"gloo", "nccl"});
  CHECK(std::filesystem::exists(dist::cuda_module::path()));
#else
  CHECK_FALSE(dist::cuda_module::built());
  CHECK(dist::available_backends() == std::vector<std::string>{"gloo"});
  CHECK(dist::placement_for(Accelerator::automatic, dist::World{}).device.is_cpu());
  CHECK_THROWS_WITH(dist::placement_for(Accelerator::cuda, dist::World{}),
                    Contains("built with a CPU-only LibTorch"));
#endif
}

#if OML_TORCH_CUDA

TEST_CASE("A CPU process does not load LibTorch's CUDA half, and asking for cuda loads it and it works",
          "[ddp][cuda_module]") {
  check_hidden_case_passes("[.cuda_module_fresh_process]");
}

TEST_CASE("cuda_module: in a fresh process", "[.cuda_module_fresh_process]") {
  // This binary links liboml_core, which links libtorch_cpu only.
  REQUIRE(mapped("liboml_core.so"));
  REQUIRE_FALSE(mapped("libtorch_cuda.so"));
  CHECK(dist::placement_for(Accelerator::cpu, dist::World{}).device.is_cpu());
  if (!dist::cuda_module::driver_present()) {
    // No NVIDIA driver (CI, CPU servers): auto is the CPU without loading anything of CUDA.
    CHECK(dist::placement_for(Accelerator::automatic, dist::World{}).device.is_cpu());
    CHECK_FALSE(mapped("libtorch_cuda.so"));
    CHECK_FALSE(dist::cuda_module::loaded());
  }
  // CUDA_VISIBLE_DEVICES is empty (check_hidden_case_passes): no GPU, whatever the machine has.
  CHECK_THROWS_AS(dist::placement_for(Accelerator::cuda, dist::World{}), oml::ConfigError);
  CHECK_THROWS_WITH(dist::placement_for(Accelerator::cuda, dist::World{}),
                    Contains("no GPU is visible to this process"));
  CHECK(dist::cuda_module::loaded());
  CHECK(mapped("libtorch_cuda.so"));
  CHECK(mapped("liboml_core_cuda.so"));
  // LibTorch now has its CUDA half: CUDA kernels are registered and a CUDA tensor fails for want
  // of a GPU, not of the library.
  CHECK(c10::Dispatcher::singleton()
            .findOp({"aten::add", "Tensor"})
            ->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
  CHECK(torch::cuda::device_count() == 0);
  CHECK_THROWS_WITH(torch::ones({2}, torch::kCUDA), !Contains("without ATen_cuda library"));
  CHECK(dist::placement_for(Accelerator::automatic, dist::World{}).device.is_cpu());  // no GPU visible
  dist::cuda_module::load();  // once per process: a second call returns at once
}

TEST_CASE("Asking LibTorch about CUDA before the module is loaded is reported, not run on the CPU",
          "[ddp][cuda_module]") {
  check_hidden_case_passes("[.cuda_module_too_late]");
}

TEST_CASE("cuda_module: CUDA queried first", "[.cuda_module_too_late]") {
  CHECK_FALSE(torch::cuda::is_available());  // settles LibTorch's CUDA hooks without the module
  CHECK_THROWS_AS(dist::cuda_module::load(), oml::InternalError);
  CHECK_THROWS_WITH(dist::placement_for(Accelerator::cuda, dist::World{}),
                    Contains("queried in this process before oml-cpp loaded its CUDA module"));
}

#endif

}  // namespace cuda_module_tests
