#pragma once
// Learning-rate schedulers with saveable state (`scheduling`; docs/models.md#schedulers-schedulingscheduler).

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace oml::optim {

/// What a scheduler's build gets from the pipeline.
struct SchedulerContext {
  torch::optim::Optimizer* optimizer = nullptr;  ///< required
  int64_t total_steps = 0;  ///< scheduler steps in the whole run (epochs or batches, per interval)
};

/// Contract for every scheduler:
/// - construction sets each parameter group's lr to its value at step 0, remembering the
///   optimizer's lrs at that moment as base lrs;
/// - `step(metric)` advances one interval (an epoch or `scheduler_frequency` batches, as the
///   pipeline's `scheduling.scheduler_interval` says) and sets the new lrs; schedulers with
///   `requires_metric()` need the monitored metric's value (UsageError without it);
/// - `state()` / `load_state()` round-trip everything needed to continue identically
///   (a dict of numbers and lists, stored in checkpoints);
/// - schedulers that cycle momentum (momentum_at() returns a value) set it with the lr: SGD's
///   and RMSprop's `momentum`, beta1 of the Adam family, as torch's CyclicLR / OneCycleLR.
class Scheduler {
 public:
  explicit Scheduler(torch::optim::Optimizer& optimizer);
  virtual ~Scheduler() = default;

  void step(std::optional<double> metric = std::nullopt);
  virtual bool requires_metric() const { return false; }

  /// Current lr of every parameter group.
  std::vector<double> lrs() const;
  int64_t step_count() const { return step_; }

  c10::IValue state() const;
  /// DataError when `state` was written by another kind of scheduler or for other groups.
  void load_state(const c10::IValue& state);

 protected:
  /// Closed-form schedulers return the lr of `group` at `step`; stateful ones override advance().
  virtual double lr_at(int64_t step, std::size_t group, double base_lr) const = 0;
  /// The momentum of `group` at `step` for schedulers that cycle it; nullopt: left alone.
  virtual std::optional<double> momentum_at(int64_t, std::size_t) const { return std::nullopt; }
  virtual void advance(std::optional<double> metric);
  /// Extra state of stateful schedulers.
  virtual void save_extra(c10::impl::GenericDict& out) const {}
  virtual void load_extra(const c10::impl::GenericDict& in) {}
  virtual const char* kind() const = 0;
  /// Entries of a saved state for load_state() and load_extra(): DataError naming the entry
  /// when it is missing or not what state() writes (a damaged checkpoint).
  static c10::IValue state_entry(const c10::impl::GenericDict& state, const std::string& key);
  static int64_t state_integer(const c10::impl::GenericDict& state, const std::string& key);
  /// A number (a float, or an integer); finite unless `finite` is false.
  static double state_number(const c10::IValue& value, const std::string& key, bool finite = true);
  void apply();
  void set_lr(std::size_t group, double lr);
  /// Whether the optimizer has a momentum torch's schedulers cycle (`momentum` or `betas` in
  /// its defaults): sgd, rmsprop, adam, adamw, adamax, nadam, radam.
  static bool has_momentum(const torch::optim::Optimizer& optimizer);
  void set_momentum(std::size_t group, double momentum);

  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t step_ = 0;
};

}  // namespace oml::optim
