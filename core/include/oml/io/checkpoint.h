#pragma once
// oml-cpp checkpoints (docs/models.md#weights-out-checkpoints): a torch.save-compatible dict that
// Python opens with `torch.load(path)` and whose `state_dict` loads into the matching PyTorch
// model with strict=True:
//
//   {"format": "oml-cpp-checkpoint", "format_version": 1,
//    "state_dict": {name: tensor}, "config": "<resolved YAML>", "epoch": int, "step": int,
//    "metrics": {"OVERALL/cmc/1": float, ...},
//    "resume": {"optimizer": uint8 tensor, "scheduler": dict, "criterion": {name: tensor},
//               "sampler": {"epoch": int, "batch": int, "consumed": int, "world_size": int},
//               "rng": uint8 tensor, "grad_scaler": {"scale": float, "_growth_tracker": int, ...},
//               "best_k_models": {"epoch=3-step=120.ckpt": float, ...}}}
//
// `resume` is optional, and so are its `grad_scaler` (precision 16 runs only) and `best_k_models`
// (runs with save_top_k other than 1). The sampler position is where
// an epoch stands in its global order (plugins/ddp/include/oml/ddp/epoch_position.h), so that any number of
// ranks can continue it; checkpoints of earlier builds have no "consumed" and "world_size" (only "batch":
// steps of the world that wrote them, which they do not name). The optimizer state is LibTorch's own archive
// stored as bytes (PyTorch cannot interpret it, but it survives a Python round trip untouched).

#include <ATen/core/ivalue.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oml/io/state_dict.h"

namespace oml::io {

inline constexpr const char* kCheckpointFormat = "oml-cpp-checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

/// What a training run needs to continue exactly where it stopped.
struct ResumeState {
  at::Tensor optimizer;       ///< serialised optimizer state (uint8), see optim/resume.h
  c10::IValue scheduler;      ///< Scheduler::state()
  StateDict criterion;        ///< loss parameters (e.g. ArcFace class weights)
  int64_t sampler_epoch = 0;  ///< next epoch to run
  int64_t sampler_batch = 0;  ///< steps of that epoch already taken (by every run that worked on it)
  at::Tensor rng;             ///< CPU generator state (uint8), see optim/resume.h
  /// Items (batches or indices) of the epoch's global order already consumed by all ranks
  /// together, and the number of ranks that started the epoch (ddp::EpochPosition). Both or
  /// neither: checkpoints of earlier builds have neither.
  std::optional<int64_t> sampler_consumed;
  std::optional<int64_t> sampler_world_size;
  c10::IValue grad_scaler;  ///< GradScaler::state() of a float16 run; None otherwise
  /// EarlyStopping::state() of a run with `early_stopping:` (best score, validations without
  /// improvement, as Lightning's callback state); None otherwise.
  c10::IValue early_stopping;
  /// The run's id at its tracker as "<logger>:<id>" (report::RunLogger::run_id: "wandb:3k9x0q2a",
  /// "mlflow:<run id>"); empty when the logger has none. Saved as resume.logger_run_id when set.
  std::string logger_run_id;
  /// Seconds the run has trained so far, over all its processes (Lightning's Timer state, which
  /// `max_time` counts against); absent in checkpoints of runs that did not keep it.
  std::optional<double> training_time_s;
  /// The checkpoints save_top_k keeps, by file name in the run's checkpoints/ folder, with their
  /// value of metric_for_checkpointing (Lightning's ModelCheckpoint.best_k_models); saved as
  /// resume.best_k_models (a dict, which keeps their order) when not empty.
  std::vector<std::pair<std::string, double>> best_k_models;  ///< in the order they were saved
};

struct Checkpoint {
  int64_t format_version = kCheckpointVersion;
  StateDict state_dict;
  std::string config;  ///< resolved YAML of the run
  int64_t epoch = 0;
  int64_t step = 0;
  std::map<std::string, double> metrics;
  std::optional<ResumeState> resume;
};

/// Writes `checkpoint` atomically (a crash leaves the previous file intact).
void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);

/// The file save_checkpoint writes, as bytes (to write one checkpoint under several names).
std::string checkpoint_bytes(const Checkpoint& checkpoint);

/// Reads an oml-cpp checkpoint. DataError when the file is not one (use load_weights for plain
/// PyTorch state dicts) or has a newer format_version than this build understands.
Checkpoint load_checkpoint(const std::filesystem::path& path);

}  // namespace oml::io
