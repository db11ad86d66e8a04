#include "oml/distributed/device.h"

#include <torch/cuda.h>

#include "distributed/cuda_module.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"

namespace oml::distributed {

Placement placement_for(config::Accelerator accelerator, const World& world,
                        const std::vector<int64_t>& device_ids) {
  using config::Accelerator;
  Placement placement;
  if (accelerator == Accelerator::cpu) return placement;
  if (accelerator == Accelerator::automatic) {
    // Without a CUDA build or an NVIDIA driver there is no GPU to find, and LibTorch's CUDA
    // half (cuda_module.h) stays unloaded.
    if (!cuda_module::built() || !cuda_module::driver_present()) return placement;
    try {
      cuda_module::load();
    } catch (const RuntimeError& e) {
      oml::log::warn(std::string("accelerator: auto: using the CPU: ") + e.what());
      return placement;
    }
    if (!torch::cuda::is_available()) return placement;
  } else {
    OML_CHECK(cuda_module::built(), ConfigError,
              "accelerator: cuda was requested, but this oml-cpp is built with a CPU-only LibTorch (use "
              "accelerator: cpu, or build against the CUDA torch wheel: scripts/build.sh)");
    cuda_module::load();
    if (!torch::cuda::is_available()) {
      throw ConfigError(
          "accelerator: cuda was requested, but no GPU is visible to this process (this oml-cpp is "
          "built with a CUDA LibTorch and NCCL: check the NVIDIA driver and CUDA_VISIBLE_DEVICES, or "
          "use accelerator: cpu)");
    }
  }
  const int gpus = static_cast<int>(torch::cuda::device_count());
  int64_t gpu = world.local_rank;
  if (!device_ids.empty()) {
    OML_CHECK(world.local_rank < static_cast<int>(device_ids.size()), ConfigError, "devices lists ",
              device_ids.size(), " GPU id(s) but this machine runs local rank ", world.local_rank);
    gpu = device_ids[world.local_rank];
  }
  OML_CHECK(gpu < gpus, ConfigError, "accelerator: cuda: local rank ", world.local_rank, " needs GPU ", gpu,
            " but only ", gpus, " are visible (GPU ids 0 to ", gpus - 1, "; start at most ", gpus,
            " ranks per machine)");
  placement.device = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(gpu));
  placement.backend = "nccl";
  return placement;
}

}  // namespace oml::distributed
