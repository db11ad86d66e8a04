#include "oml/distributed/device.h"

#include <torch/cuda.h>

#include "c10d_adapter.h"
#include "oml/common/error.h"

namespace oml::distributed {

Placement placement_for(config::Accelerator accelerator, const World& world,
                        const std::vector<int64_t>& device_ids) {
  using config::Accelerator;
  Placement placement;
  if (accelerator == Accelerator::cpu ||
      (accelerator == Accelerator::automatic && !torch::cuda::is_available()))
    return placement;
  if (!torch::cuda::is_available()) {
    throw ConfigError(detail::backend_available("nccl")  // NCCL is compiled in with CUDA LibTorch
                          ? "accelerator: cuda was requested, but no GPU is visible to this process (this "
                            "oml-cpp is built with a CUDA LibTorch and NCCL: check the NVIDIA driver and "
                            "CUDA_VISIBLE_DEVICES, or use accelerator: cpu)"
                          : "accelerator: cuda was requested, but this oml-cpp is built with a CPU-only "
                            "LibTorch (use accelerator: cpu, or build against the CUDA torch wheel: "
                            "scripts/build.sh)");
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
