#include "oml/distributed/device.h"

#include <torch/cuda.h>

#include "oml/common/error.h"

namespace oml::distributed {

Placement placement_for(const std::string& accelerator, const World& world) {
  Placement placement;
  if (accelerator == "cpu") return placement;
  OML_CHECK(accelerator == "cuda", ConfigError, "accelerator must be 'cpu' or 'cuda', got '", accelerator,
            "'");
  OML_CHECK(torch::cuda::is_available(), ConfigError,
            "accelerator: cuda was requested, but this LibTorch has no CUDA support or sees no GPU "
            "(use accelerator: cpu, or build against a CUDA LibTorch with -DCMAKE_PREFIX_PATH)");
  const int gpus = static_cast<int>(torch::cuda::device_count());
  OML_CHECK(world.local_rank < gpus, ConfigError, "accelerator: cuda: local rank ", world.local_rank,
            " needs its own GPU but only ", gpus, " are visible (start at most ", gpus,
            " ranks per machine)");
  placement.device = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(world.local_rank));
  placement.backend = "nccl";
  return placement;
}

}  // namespace oml::distributed
