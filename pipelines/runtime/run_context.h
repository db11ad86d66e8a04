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

namespace oml::data {
class Dataframe;
}  // namespace oml::data

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

/// Every rank must read the same rows: machines given different files at the same path (an
/// edited copy, another version) would mix two datasets into one model and its metrics, or
/// disagree on their step counts. Compares the dataframe's rows per split and digest
/// (data::Dataframe::digest) across the ranks; a difference is a DataError on every rank naming
/// the file and the ranks. Nothing to do in a single process.
void check_same_dataframe(const RunContext& context, const data::Dataframe& dataframe);

}  // namespace oml::pipelines
