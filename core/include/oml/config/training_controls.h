#pragma once
// Lightning's training controls (docs/training.md#training-controls-lightnings), under Lightning's names:
// top-level keys of the config, or inside OML's `lightning_trainer_extra_args: {...}` (which OML
// passes to `pl.Trainer(**...)`). Parsed once here; the Trainer acts on the typed values.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oml/config/options.h"

namespace oml::config {

class ErrorList;
class MapReader;
class Node;

/// `gradient_clip_algorithm:` torch.nn.utils.clip_grad_norm_ (2-norm over all gradients
/// together) or clip_grad_value_ (each element to [-val, val]).
enum class GradientClipAlgorithm { norm, value };
const std::vector<std::string>& gradient_clip_algorithm_names();

/// Lightning's `deterministic:`: off (false, or not given), on (true: an operation without a
/// deterministic algorithm is an error when it runs) or warn ("warn": a warning instead).
enum class Determinism { off, on, warn };

/// Lightning's `limit_train_batches` / `limit_val_batches`: an integer is a number of batches
/// (1 is one batch), a float a fraction of them (1.0 is all of them).
struct BatchLimit {
  bool is_fraction = true;
  double value = 1.0;

  /// Whether any batch is left out.
  bool limits() const { return !(is_fraction && value == 1.0); }
  /// The batches of `batches` that run, as Lightning's _parse_num_batches: min(batches, N), or
  /// int(batches x fraction). SettingError naming `key` when a fraction > 0 leaves no batch.
  int64_t apply(int64_t batches, const std::string& key) const;
};

/// `early_stopping: {monitor, patience, mode, min_delta}` — Lightning's EarlyStopping callback
/// with its defaults: stop once `monitor` has not improved by more than min_delta in `patience`
/// consecutive validations (a non-finite value stops at once).
struct EarlyStoppingOptions {
  std::string monitor;  ///< a validation metric key ("OVERALL/cmc/1"); required
  int64_t patience = 3;
  CheckpointMode mode = CheckpointMode::min;  ///< Lightning's default: smaller is better
  double min_delta = 0.0;                     ///< improvements of at most this much do not count
};

/// Lightning's ModelCheckpoint callback (docs/training.md#checkpoints), as top-level keys under its
/// argument names. Its `monitor` and `mode` are OML's metric_for_checkpointing and
/// mode_for_checkpointing (what OML's pipeline passes it). Lightning's defaults, except
/// `save_last` (true here: a run can always be resumed) and the trigger when none is given.
struct CheckpointingOptions {
  /// The best checkpoints by metric_for_checkpointing kept: 1 is best.ckpt (OML's filename), k > 1
  /// the k best, -1 every one compared, 0 none.
  int64_t save_top_k = 1;
  /// checkpoints/last.ckpt, the state `--resume` continues (Lightning: off unless asked).
  bool save_last = true;
  /// Lightning's triggers, at most one of them >= 1 (0 gives that trigger up). None given: at
  /// each validation and every kDefaultCheckpointInterval seconds (the Trainer's default; Lightning
  /// checks after every epoch).
  std::optional<int64_t> every_n_epochs;
  std::optional<int64_t> every_n_train_steps;
  std::optional<double> train_time_interval_s;  ///< Lightning's timedelta, in seconds

  /// Whether the config gives any trigger (even a 0), which replaces the default ones.
  bool has_trigger() const { return every_n_epochs || every_n_train_steps || train_time_interval_s; }
};

/// Without a trigger in the config, last.ckpt is also written after the first optimizer step
/// that ends this many seconds after the previous time check (training start, or the last
/// time-triggered checkpoint): what a SIGKILL can cost at most.
inline constexpr double kDefaultCheckpointInterval = 300.0;

struct TrainingControls {
  /// Backward on this many batches, then one optimizer step with their summed gradients of
  /// loss / accumulate_grad_batches (Lightning's scaling); an epoch's last batch always steps.
  int64_t accumulate_grad_batches = 1;
  std::optional<double> gradient_clip_val;  ///< none (or 0, as Lightning): no clipping
  GradientClipAlgorithm gradient_clip_algorithm = GradientClipAlgorithm::norm;
  BatchLimit limit_train_batches;  ///< per rank and epoch
  BatchLimit limit_val_batches;    ///< of the validation loader (bs_val rows each); 0: no validation
  std::optional<EarlyStoppingOptions> early_stopping;
  /// Lightning's `max_time` ("DD:HH:MM:SS" or {days, hours, minutes, seconds, ...}), in seconds:
  /// training stops after the optimizer step at which it has run this long (resumed runs count
  /// their earlier time), validates and writes its checkpoints as at an epoch's end.
  std::optional<double> max_time_s;
  CheckpointingOptions checkpointing;
  /// Lightning's `deterministic`: every process of the run uses deterministic algorithms
  /// (oml::use_deterministic_algorithms) from its start.
  Determinism deterministic = Determinism::off;
  /// Lightning's `benchmark`: torch.backends.cudnn.benchmark in every process (cuDNN times its
  /// algorithms for each new input shape and keeps the fastest). None: PyTorch's setting, which
  /// is off (and off under `deterministic`, as Lightning).
  std::optional<bool> benchmark;
};

/// The keys `lightning_trainer_extra_args` accepts (Lightning Trainer arguments oml-cpp has).
const std::vector<std::string>& lightning_trainer_arg_names();
/// The ModelCheckpoint arguments read at the top level (CheckpointingOptions).
const std::vector<std::string>& checkpoint_arg_names();

/// Reads the controls from the top-level reader `root` and from its `lightning_trainer_extra_args`
/// block (early stopping and checkpointing, Lightning callbacks, at the top level only);
/// `check_val_every_n_epoch` (Lightning's name for OML's `valid_period`) goes into
/// `valid_period`, which the caller has read already. Problems are collected in `errors`: a key
/// given in both places, an unsupported key in the block (named, with the supported ones), and
/// values out of range.
TrainingControls parse_training_controls(MapReader& root, int64_t& valid_period, ErrorList& errors);

}  // namespace oml::config
