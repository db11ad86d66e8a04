#pragma once
// The built-in schedulers. Formulas follow torch.optim.lr_scheduler's closed forms; t is the
// number of step() calls so far, base the group's lr when the scheduler was built.

#include <optional>
#include <string>
#include <vector>

#include "oml/optim/scheduler.h"

namespace oml::optim {

/// base * gamma^floor(t / step_size)
class StepScheduler : public Scheduler {
 public:
  StepScheduler(torch::optim::Optimizer& optimizer, int64_t step_size, double gamma);
  /// config::ArgumentError unless step_size >= 1.
  static void check(int64_t step_size);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "step"; }

 private:
  int64_t step_size_;
  double gamma_;
};

/// base * gamma^(number of milestones <= t)
class MultiStepScheduler : public Scheduler {
 public:
  MultiStepScheduler(torch::optim::Optimizer& optimizer, std::vector<int64_t> milestones, double gamma);
  /// config::ArgumentError unless the milestones increase.
  static void check(const std::vector<int64_t>& milestones);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "multi_step"; }

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

/// base * gamma^t
class ExponentialScheduler : public Scheduler {
 public:
  ExponentialScheduler(torch::optim::Optimizer& optimizer, double gamma);
  /// config::ArgumentError unless gamma > 0.
  static void check(double gamma);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "exponential"; }

 private:
  double gamma_;
};

/// Linear warm-up from base * warmup_start_factor to base over `warmup_steps`, then
/// eta_min + (base - eta_min) (1 + cos(pi t' / t_max)) / 2 with t' = t - warmup_steps: past t_max
/// it rises again, as torch's CosineAnnealingLR.
class CosineAnnealingScheduler : public Scheduler {
 public:
  CosineAnnealingScheduler(torch::optim::Optimizer& optimizer, int64_t t_max, double eta_min,
                           int64_t warmup_steps, double warmup_start_factor);
  /// config::ArgumentError naming the first bad argument (t_max only when given).
  static void check(std::optional<int64_t> t_max, int64_t warmup_steps, double warmup_start_factor);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "cosine_annealing"; }

 private:
  int64_t t_max_, warmup_steps_;
  double eta_min_, warmup_start_factor_;
};

/// torch's OneCycleLR options (its argument names; `max_lr` absent: each group's lr at
/// construction, so scaled groups keep their ratio).
struct OneCycleOptions {
  std::optional<double> max_lr;
  std::optional<int64_t> total_steps;  ///< default: the run's scheduler steps
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  ///< cos or linear
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25, final_div_factor = 1e4;
  bool three_phase = false;
};

/// torch's OneCycleLR: from max_lr / div_factor up to max_lr over the first pct_start of
/// total_steps, then down to max_lr / (div_factor * final_div_factor) (three_phase: back to the
/// initial lr first, then down), annealing by cosine or linearly; momentum (or beta1) cycles the
/// other way between max_momentum and base_momentum. After total_steps the lr stays where it is
/// (torch raises instead).
class OneCycleScheduler : public Scheduler {
 public:
  OneCycleScheduler(torch::optim::Optimizer& optimizer, int64_t total_steps, OneCycleOptions options);
  /// config::ArgumentError naming the first bad argument (total_steps only when given).
  static void check(const OneCycleOptions& options);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  std::optional<double> momentum_at(int64_t t, std::size_t) const override;
  const char* kind() const override { return "one_cycle"; }

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;  ///< 0: initial lr, 1: max lr, 2: min lr
    bool momentum_up;      ///< from base to max momentum (else max to base); third phase: constant
    bool momentum_constant = false;
  };
  /// The phase of step t and how far into it (torch's pct).
  std::pair<const Phase*, double> phase_at(int64_t t) const;
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_;
  OneCycleOptions options_;
  std::vector<Phase> phases_;
};

/// torch's CyclicLR: the lr goes between base_lr and max_lr in cycles of step_size_up +
/// step_size_down steps, scaled per `mode` (triangular: 1; triangular2: halved every cycle;
/// exp_range: gamma^t); with cycle_momentum, momentum (or beta1) goes the other way between
/// max_momentum and base_momentum. Every group gets base_lr at construction, as in torch.
struct CyclicOptions {
  double base_lr = 0, max_lr = 0;
  int64_t step_size_up = 2000;
  std::optional<int64_t> step_size_down;  ///< default: step_size_up
  std::string mode = "triangular";
  double gamma = 1.0;
  /// cycle or iterations, accepted and, as by torch without a scale_fn, replaced by the mode's
  /// (exp_range: iterations; the others: cycle).
  std::string scale_mode;
  bool cycle_momentum = true;
  double base_momentum = 0.8, max_momentum = 0.9;
};

class CyclicScheduler : public Scheduler {
 public:
  CyclicScheduler(torch::optim::Optimizer& optimizer, CyclicOptions options);
  /// config::ArgumentError naming the first bad argument.
  static void check(const CyclicOptions& options);

 protected:
  double lr_at(int64_t t, std::size_t, double) const override;
  std::optional<double> momentum_at(int64_t t, std::size_t) const override;
  const char* kind() const override { return "cyclic"; }

 private:
  /// The position in the cycle (torch's scale_factor, 0 at base, 1 at the peak) and the scale
  /// of the cycle's height at step t.
  std::pair<double, double> shape_at(int64_t t) const;

  CyclicOptions options_;
  double total_size_, step_ratio_;
};

/// torch's LinearLR (a linear warm-up): base x (start_factor + (end_factor - start_factor) x
/// min(t, total_iters) / total_iters).
class LinearScheduler : public Scheduler {
 public:
  LinearScheduler(torch::optim::Optimizer& optimizer, double start_factor, double end_factor,
                  int64_t total_iters);
  /// config::ArgumentError naming the first bad argument.
  static void check(double start_factor, double end_factor, int64_t total_iters);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "linear"; }

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// torch's PolynomialLR: base x (1 - min(t, total_iters) / total_iters)^power.
class PolynomialScheduler : public Scheduler {
 public:
  PolynomialScheduler(torch::optim::Optimizer& optimizer, int64_t total_iters, double power);
  /// config::ArgumentError unless total_iters >= 1.
  static void check(int64_t total_iters);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "polynomial"; }

 private:
  int64_t total_iters_;
  double power_;
};

struct PlateauOptions {
  /// min: lower is better (a loss); max: higher is better (cmc, precision). torch's default, min,
  /// so that OML's configs, which leave it to torch, behave as in OML.
  std::string mode = "min";
  double factor = 0.1;      ///< lr *= factor on a plateau
  int64_t patience = 10;    ///< steps without improvement tolerated
  double threshold = 1e-4;  ///< relative improvement needed
  int64_t cooldown = 0;     ///< steps to wait after a reduction
  double min_lr = 0.0;
};

/// config::ArgumentError naming the first bad field.
void check_options(const PlateauOptions& options);

/// torch's ReduceLROnPlateau (relative threshold): needs the monitored metric at every step.
class ReduceOnPlateauScheduler : public Scheduler {
 public:
  ReduceOnPlateauScheduler(torch::optim::Optimizer& optimizer, PlateauOptions options);
  bool requires_metric() const override { return true; }

 protected:
  double lr_at(int64_t, std::size_t, double base) const override { return base; }
  void advance(std::optional<double> metric) override;
  void save_extra(c10::impl::GenericDict& out) const override;
  void load_extra(const c10::impl::GenericDict& in) override;
  const char* kind() const override { return "reduce_on_plateau"; }

 private:
  bool improves(double value) const;

  PlateauOptions options_;
  std::optional<double> best_;
  int64_t bad_steps_ = 0;
  int64_t cooldown_left_ = 0;
};

}  // namespace oml::optim
