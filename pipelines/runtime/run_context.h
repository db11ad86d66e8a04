#pragma once
// What every pipeline sets up first: who this process is in the world, its process group,
// its device and threads, and the helpers for work that must happen once per job.

#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "oml/config/run_config.h"
#include "oml/distributed/world.h"

namespace oml::distributed {
class ProcessGroup;
}  // namespace oml::distributed

namespace oml::pipelines {

struct RunContext {
  distributed::World world;
  std::shared_ptr<distributed::ProcessGroup> group;  ///< a group of one in a single process
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  int threads = 1;
  /// Autocast of every forward: training steps (Trainer::run_step) and embedding (embed_dataset).
  config::Precision precision = config::Precision::fp32;

  bool is_main() const { return world.rank == 0; }
  int rank() const { return world.rank; }
  int world_size() const { return world.world_size; }

  /// Runs `work` on rank 0 only; every rank leaves together.
  void rank0_only(const std::function<void()>& work) const;
  /// Rank 0's `text` on every rank (e.g. a run name that contains a timestamp).
  std::string from_rank0(const std::string& text) const;
};

/// Reads the world from the environment, connects the process group (Gloo on CPU, NCCL on
/// CUDA), sets the intra-op threads and the log prefix. Quiet progress on ranks other than 0.
RunContext start_run(const config::RunConfig& config);

}  // namespace oml::pipelines
