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
/// eta_min + (base - eta_min) (1 + cos(pi t' / t_max)) / 2 with t' = t - warmup_steps, held at
/// eta_min after t_max.
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

/// torch's OneCycleLR with cosine annealing: from max_lr / div_factor up to max_lr over the
/// first pct_start of total_steps, then down to max_lr / (div_factor * final_div_factor).
/// max_lr is each group's lr at construction (scaled groups keep their ratio).
class OneCycleScheduler : public Scheduler {
 public:
  OneCycleScheduler(torch::optim::Optimizer& optimizer, int64_t total_steps, double pct_start,
                    double div_factor, double final_div_factor);
  /// config::ArgumentError naming the first bad argument (total_steps only when given).
  static void check(std::optional<int64_t> total_steps, double pct_start, double div_factor,
                    double final_div_factor);

 protected:
  double lr_at(int64_t t, std::size_t, double base) const override;
  const char* kind() const override { return "one_cycle"; }

 private:
  int64_t total_steps_;
  double pct_start_, div_factor_, final_div_factor_;
};

struct PlateauOptions {
  std::string mode = "max";  ///< max: higher metric is better (cmc, precision); min: lower is better
  double factor = 0.1;       ///< lr *= factor on a plateau
  int64_t patience = 10;     ///< steps without improvement tolerated
  double threshold = 1e-4;   ///< relative improvement needed
  int64_t cooldown = 0;      ///< steps to wait after a reduction
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
