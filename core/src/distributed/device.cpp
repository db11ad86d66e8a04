#include "oml/distributed/device.h"

#include <torch/cuda.h>

#include "oml/common/error.h"

namespace oml::distributed {

Placement placement_for(const std::string& accelerator, const World& world,
                        const std::vector<int64_t>& device_ids) {
  Placement placement;
  if (accelerator == "cpu" || (accelerator == "auto" && !torch::cuda::is_available())) return placement;
  OML_CHECK(accelerator == "cuda" || accelerator == "auto", ConfigError,
            "accelerator must be 'cpu', 'cuda' (or 'gpu') or 'auto', got '", accelerator, "'");
  OML_CHECK(torch::cuda::is_available(), ConfigError,
            "accelerator: cuda was requested, but this LibTorch has no CUDA support or sees no GPU "
            "(use accelerator: cpu, or build against a CUDA LibTorch with -DCMAKE_PREFIX_PATH)");
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
