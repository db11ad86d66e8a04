#pragma once
// Where a rank computes and which backend its collectives use, from `accelerator:` and the
// World: cpu -> Gloo on the CPU; cuda -> NCCL on cuda:LOCAL_RANK (each rank its own GPU).

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "oml/config/options.h"
#include "oml/distributed/world.h"

namespace oml::distributed {

struct Placement {
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::string backend = "gloo";
};

/// `auto` is cuda when LibTorch sees a GPU, else cpu. With cuda, local rank r computes on GPU
/// `device_ids[r]` (the config's `devices: [ids]`), or GPU r when `device_ids` is empty.
/// Throws ConfigError for `cuda` on a LibTorch without CUDA or without a visible GPU, and when
/// LOCAL_RANK has no GPU of its own.
Placement placement_for(config::Accelerator accelerator, const World& world,
                        const std::vector<int64_t>& device_ids = {});

}  // namespace oml::distributed
