#pragma once
// Lightning's EarlyStopping callback (`early_stopping: {monitor, patience, mode, min_delta}`):
// after each validation the Trainer passes the monitored value; once it has not improved in
// `patience` validations in a row (or is not finite) training stops after that epoch, saying why.
// Its state travels in checkpoints, so a resumed run stops where the uninterrupted one would.

#include <ATen/core/ivalue.h>

#include <string>

#include "oml/config/training_controls.h"

namespace oml::pipelines {

class EarlyStopping {
 public:
  explicit EarlyStopping(config::EarlyStoppingOptions options);

  /// Takes one validation's value of the monitored metric (as Lightning's
  /// _evaluate_stopping_criteria): an improvement is value - min_delta > best (max) or
  /// value + min_delta < best (min). Returns true when training should stop; reason() says why.
  bool update(double value);
  /// Lightning's message for the last update that stopped ("" before).
  const std::string& reason() const { return reason_; }
  const std::string& monitor() const { return options_.monitor; }

  /// {"best_score": float, "wait_count": int} (Lightning's callback state).
  c10::IValue state() const;
  /// DataError naming the entry when `state` is not what state() writes (a damaged checkpoint).
  void load_state(const c10::IValue& state);

 private:
  config::EarlyStoppingOptions options_;
  double best_;
  int64_t wait_ = 0;
  std::string reason_;
};

}  // namespace oml::pipelines
