#include "training/checkpoint_schedule.h"

namespace oml::pipelines {

CheckpointSchedule::CheckpointSchedule(const config::CheckpointingOptions& options)
    : by_default_(!options.has_trigger()), last_time_check_(Clock::now()) {
  if (by_default_) {
    // At each validation (below) and by time: what an epoch of any length costs nothing to keep.
    interval_s_ = config::kDefaultCheckpointInterval;
    return;
  }
  every_n_epochs_ = options.every_n_epochs;
  every_n_train_steps_ = options.every_n_train_steps.value_or(0);
  interval_s_ = options.train_time_interval_s;
}

void CheckpointSchedule::start(Clock::time_point now) { last_time_check_ = now; }

bool CheckpointSchedule::after_step(int64_t step, Clock::time_point now) {
  const bool by_steps = every_n_train_steps_ >= 1 && step % every_n_train_steps_ == 0;
  const bool by_time =
      interval_s_ && std::chrono::duration<double>(now - last_time_check_).count() >= *interval_s_;
  // As Lightning: the interval restarts when it triggered, not at other checkpoints.
  if (by_time) last_time_check_ = now;
  return by_steps || by_time;
}

CheckpointSchedule::EpochEnd CheckpointSchedule::at_epoch_end(int64_t epoch, bool validated) const {
  EpochEnd due;
  if (!every_n_epochs_) {
    // No epoch trigger given: the best checkpoints are compared at every validation, where the
    // weights are the ones that scored. With the default trigger last.ckpt is written there too.
    due.compare_top_k = validated;
    due.write_last = validated && by_default_;
    return due;
  }
  const int64_t n = *every_n_epochs_;
  // Every n-th epoch, validated or not (Lightning, when validation is not every epoch, saves at
  // the end of validations only: with check_val_every_n_epoch 5, every_n_epochs 1 saves every
  // 5th epoch).
  due.write_last = n >= 1 && (epoch + 1) % n == 0;
  due.compare_top_k = due.write_last && validated;
  return due;
}

}  // namespace oml::pipelines
