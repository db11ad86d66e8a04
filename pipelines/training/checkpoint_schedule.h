#pragma once
// When the Trainer writes last.ckpt and compares a validation with the kept best checkpoints
// (docs/training.md#checkpoints): Lightning's ModelCheckpoint triggers, read from
// config::CheckpointingOptions.
//
//   CheckpointSchedule schedule(config.controls.checkpointing);
//   schedule.start(now);                                   // the first batch of this process
//   if (schedule.after_step(step, now)) ... last.ckpt      // after every optimizer step
//   const auto due = schedule.at_epoch_end(epoch, validated);
//   if (due.compare_top_k) ... best.ckpt / the k best      // after the epoch's validation
//   if (due.write_last) ... last.ckpt
//
// | config                 | after a step                         | at an epoch's end                |
// |------------------------|--------------------------------------|----------------------------------|
// | no trigger (default)   | kDefaultCheckpointInterval s elapsed | validated: top k and last        |
// | every_n_epochs: n      | —                                    | n-th: last; top k if validated   |
// | every_n_train_steps: n | step % n == 0                        | validated: top k                 |
// | train_time_interval: t | t s after the previous time check    | validated: top k                 |
//
// The Trainer adds last.ckpt at the end of training and on an interrupt, whatever the trigger.
// Only rank 0 asks: no decision here is collective (only rank 0 writes).

#include <chrono>
#include <cstdint>
#include <optional>

#include "oml/config/training_controls.h"

namespace oml::pipelines {

class CheckpointSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  explicit CheckpointSchedule(const config::CheckpointingOptions& options);

  /// Starts the time trigger's clock (Lightning's on_train_start): the first interval ends
  /// `train_time_interval` after `now`.
  void start(Clock::time_point now);

  /// After optimizer step `step` (counted over the whole run, 1 for the first) ended at `now`:
  /// whether last.ckpt is due. A due time trigger restarts its interval at `now`.
  bool after_step(int64_t step, Clock::time_point now);

  struct EpochEnd {
    bool compare_top_k = false;  ///< offer the validation's value to the kept best checkpoints
    bool write_last = false;     ///< last.ckpt
  };
  /// At the end of epoch `epoch` (0-based), after its validation when `validated`.
  EpochEnd at_epoch_end(int64_t epoch, bool validated) const;

 private:
  bool by_default_;                        ///< the config gives no trigger
  std::optional<int64_t> every_n_epochs_;  ///< given (0: never by epochs)
  int64_t every_n_train_steps_ = 0;        ///< 0: not by steps
  std::optional<double> interval_s_;       ///< the time trigger, given or the default
  Clock::time_point last_time_check_;
};

}  // namespace oml::pipelines
