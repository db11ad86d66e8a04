#include "oml/optim/schedulers.h"

#include <torch/torch.h>

#include <cmath>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"

namespace oml::optim {

StepScheduler::StepScheduler(torch::optim::Optimizer& optimizer, int64_t step_size, double gamma)
    : Scheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check(step_size_);
  apply();
}
void StepScheduler::check(int64_t step_size) {
  config::check_argument(step_size >= 1, "scheduler 'step'", "step_size", "step_size must be >= 1, got ",
                         step_size);
}
double StepScheduler::lr_at(int64_t t, std::size_t, double base) const {
  return base * std::pow(gamma_, static_cast<double>(t / step_size_));
}

MultiStepScheduler::MultiStepScheduler(torch::optim::Optimizer& optimizer, std::vector<int64_t> milestones,
                                       double gamma)
    : Scheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  check(milestones_);
  apply();
}
void MultiStepScheduler::check(const std::vector<int64_t>& milestones) {
  config::check_argument(std::is_sorted(milestones.begin(), milestones.end()), "scheduler 'multi_step'",
                         "milestones", "milestones must be increasing");
}
double MultiStepScheduler::lr_at(int64_t t, std::size_t, double base) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), t) - milestones_.begin();
  return base * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialScheduler::ExponentialScheduler(torch::optim::Optimizer& optimizer, double gamma)
    : Scheduler(optimizer), gamma_(gamma) {
  check(gamma_);
  apply();
}
void ExponentialScheduler::check(double gamma) {
  config::check_argument(gamma > 0, "scheduler 'exponential'", "gamma", "gamma must be > 0, got ", gamma);
}
double ExponentialScheduler::lr_at(int64_t t, std::size_t, double base) const {
  return base * std::pow(gamma_, static_cast<double>(t));
}

CosineAnnealingScheduler::CosineAnnealingScheduler(torch::optim::Optimizer& optimizer, int64_t t_max,
                                                   double eta_min, int64_t warmup_steps,
                                                   double warmup_start_factor)
    : Scheduler(optimizer),
      t_max_(t_max),
      warmup_steps_(warmup_steps),
      eta_min_(eta_min),
      warmup_start_factor_(warmup_start_factor) {
  check(t_max_, warmup_steps_, warmup_start_factor_);
  apply();
}
void CosineAnnealingScheduler::check(std::optional<int64_t> t_max, int64_t warmup_steps,
                                     double warmup_start_factor) {
  const char* what = "scheduler 'cosine_annealing'";
  config::check_argument(!t_max || *t_max >= 1, what, "T_max", "T_max must be >= 1, got ", t_max.value_or(0));
  config::check_argument(warmup_steps >= 0, what, "warmup_steps", "warmup_steps must be >= 0, got ",
                         warmup_steps);
  config::check_argument(warmup_start_factor > 0 && warmup_start_factor <= 1, what, "warmup_start_factor",
                         "warmup_start_factor must be in (0, 1], got ", warmup_start_factor);
}
double CosineAnnealingScheduler::lr_at(int64_t t, std::size_t, double base) const {
  if (t < warmup_steps_) {
    const double f = static_cast<double>(t) / static_cast<double>(warmup_steps_);
    return base * (warmup_start_factor_ + (1 - warmup_start_factor_) * f);
  }
  // As torch's CosineAnnealingLR, a cosine of period 2 T_max: past T_max the lr rises again.
  const double tc = static_cast<double>(t - warmup_steps_);
  return eta_min_ + (base - eta_min_) * (1 + std::cos(M_PI * tc / static_cast<double>(t_max_))) / 2;
}

OneCycleScheduler::OneCycleScheduler(torch::optim::Optimizer& optimizer, int64_t total_steps,
                                     OneCycleOptions options)
    : Scheduler(optimizer), total_steps_(total_steps), options_(std::move(options)) {
  options_.total_steps = total_steps_;
  check(options_);
  config::check_fits(
      !options_.cycle_momentum || has_momentum(optimizer), "scheduler 'one_cycle'", "cycle_momentum",
      "the optimizer has no momentum or beta1 to cycle (as torch's OneCycleLR, which raises); use "
      "sgd, rmsprop or an Adam-family optimizer, or set cycle_momentum: false");
  if (options_.max_lr) std::fill(base_lrs_.begin(), base_lrs_.end(), *options_.max_lr);
  // torch's phases: end_step of each, and which lrs / momenta it goes between.
  const double total = static_cast<double>(total_steps_), pct = options_.pct_start;
  if (options_.three_phase) {
    phases_ = {
        {pct * total - 1, 0, 1, false}, {2 * pct * total - 2, 1, 0, true}, {total - 1, 0, 2, true, true}};
  } else {
    phases_ = {{pct * total - 1, 0, 1, false}, {total - 1, 1, 2, true}};
  }
  apply();
}
void OneCycleScheduler::check(const OneCycleOptions& o) {
  const char* what = "scheduler 'one_cycle'";
  config::check_argument(!o.max_lr || *o.max_lr > 0, what, "max_lr", "max_lr must be > 0, got ",
                         o.max_lr.value_or(0));
  config::check_argument(!o.total_steps || *o.total_steps >= 2, what, "total_steps",
                         "total_steps must be >= 2, got ", o.total_steps.value_or(0));
  config::check_argument(o.pct_start > 0 && o.pct_start < 1, what, "pct_start",
                         "pct_start must be in (0, 1), got ", o.pct_start);
  config::check_argument(o.anneal_strategy == "cos" || o.anneal_strategy == "linear", what, "anneal_strategy",
                         "anneal_strategy must be 'cos' or 'linear', got '", o.anneal_strategy, "'");
  config::check_argument(o.div_factor > 0, what, "div_factor", "div_factor must be > 0, got ", o.div_factor);
  config::check_argument(o.final_div_factor > 0, what, "final_div_factor",
                         "final_div_factor must be > 0, got ", o.final_div_factor);
}
double OneCycleScheduler::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == "linear") return (end - start) * pct + start;
  return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1);
}
std::pair<const OneCycleScheduler::Phase*, double> OneCycleScheduler::phase_at(int64_t t) const {
  const double step = static_cast<double>(std::min(t, total_steps_));
  double start = 0;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    const Phase& phase = phases_[i];
    if (step <= phase.end_step || i + 1 == phases_.size()) {
      // A phase of no length (pct_start x total_steps = 1) is at its end at once; torch divides
      // by zero there.
      const double length = phase.end_step - start;
      return {&phase, length > 0 ? (step - start) / length : 1.0};
    }
    start = phase.end_step;
  }
  return {&phases_.back(), 1.0};
}
double OneCycleScheduler::lr_at(int64_t t, std::size_t, double max_lr) const {
  const double initial = max_lr / options_.div_factor;
  const double lrs[3] = {initial, max_lr, initial / options_.final_div_factor};
  const auto [phase, pct] = phase_at(t);
  return anneal(lrs[phase->start_lr], lrs[phase->end_lr], pct);
}
std::optional<double> OneCycleScheduler::momentum_at(int64_t t, std::size_t) const {
  if (!options_.cycle_momentum) return std::nullopt;
  const auto [phase, pct] = phase_at(t);
  const double base = options_.base_momentum, max = options_.max_momentum;
  if (phase->momentum_constant) return anneal(max, max, pct);
  return phase->momentum_up ? anneal(base, max, pct) : anneal(max, base, pct);
}

CyclicScheduler::CyclicScheduler(torch::optim::Optimizer& optimizer, CyclicOptions options)
    : Scheduler(optimizer), options_(std::move(options)) {
  check(options_);
  config::check_fits(
      !options_.cycle_momentum || has_momentum(optimizer), "scheduler 'cyclic'", "cycle_momentum",
      "the optimizer has no momentum or beta1 to cycle (as torch's CyclicLR, which raises); use "
      "sgd, rmsprop or an Adam-family optimizer, or set cycle_momentum: false");
  // torch's CyclicLR without a scale_fn (a config cannot give one) takes the mode's scale_mode,
  // whatever scale_mode says.
  options_.scale_mode = options_.mode == "exp_range" ? "iterations" : "cycle";
  const auto up = static_cast<double>(options_.step_size_up);
  const double down = options_.step_size_down ? static_cast<double>(*options_.step_size_down) : up;
  total_size_ = up + down;
  step_ratio_ = up / total_size_;
  std::fill(base_lrs_.begin(), base_lrs_.end(), options_.base_lr);
  apply();
}
void CyclicScheduler::check(const CyclicOptions& o) {
  const char* what = "scheduler 'cyclic'";
  config::check_argument(o.base_lr > 0, what, "base_lr", "base_lr must be > 0, got ", o.base_lr);
  config::check_argument(o.max_lr > 0, what, "max_lr", "max_lr must be > 0, got ", o.max_lr);
  config::check_argument(o.step_size_up >= 1, what, "step_size_up", "step_size_up must be >= 1, got ",
                         o.step_size_up);
  config::check_argument(!o.step_size_down || *o.step_size_down >= 0, what, "step_size_down",
                         "step_size_down must be >= 0, got ", o.step_size_down.value_or(0));
  config::check_argument(o.mode == "triangular" || o.mode == "triangular2" || o.mode == "exp_range", what,
                         "mode", "mode must be 'triangular', 'triangular2' or 'exp_range', got '", o.mode,
                         "'");
  config::check_argument(o.scale_mode.empty() || o.scale_mode == "cycle" || o.scale_mode == "iterations",
                         what, "scale_mode", "scale_mode must be 'cycle' or 'iterations', got '",
                         o.scale_mode, "'");
}
std::pair<double, double> CyclicScheduler::shape_at(int64_t t) const {
  const auto step = static_cast<double>(t);
  const double cycle = std::floor(1 + step / total_size_);
  const double x = 1.0 + step / total_size_ - cycle;
  const double factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  // torch applies the mode's scale function to the cycle number or to the step (scale_mode).
  const double arg = options_.scale_mode == "cycle" ? cycle : step;
  double scale = 1.0;
  if (options_.mode == "triangular2") scale = 1 / std::pow(2.0, arg - 1);
  if (options_.mode == "exp_range") scale = std::pow(options_.gamma, arg);
  return {factor, scale};
}
double CyclicScheduler::lr_at(int64_t t, std::size_t, double) const {
  const auto [factor, scale] = shape_at(t);
  return options_.base_lr + (options_.max_lr - options_.base_lr) * factor * scale;
}
std::optional<double> CyclicScheduler::momentum_at(int64_t t, std::size_t) const {
  if (!options_.cycle_momentum) return std::nullopt;
  const auto [factor, scale] = shape_at(t);
  return options_.max_momentum - (options_.max_momentum - options_.base_momentum) * factor * scale;
}

LinearScheduler::LinearScheduler(torch::optim::Optimizer& optimizer, double start_factor, double end_factor,
                                 int64_t total_iters)
    : Scheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  check(start_factor_, end_factor_, total_iters_);
  apply();
}
void LinearScheduler::check(double start_factor, double end_factor, int64_t total_iters) {
  const char* what = "scheduler 'linear'";
  config::check_argument(start_factor > 0 && start_factor <= 1, what, "start_factor",
                         "start_factor must be in (0, 1], got ", start_factor);
  config::check_argument(end_factor >= 0 && end_factor <= 1, what, "end_factor",
                         "end_factor must be in [0, 1], got ", end_factor);
  config::check_argument(total_iters >= 1, what, "total_iters", "total_iters must be >= 1, got ",
                         total_iters);
}
double LinearScheduler::lr_at(int64_t t, std::size_t, double base) const {
  const auto done = static_cast<double>(std::min(t, total_iters_));
  return base * (start_factor_ + (end_factor_ - start_factor_) * done / static_cast<double>(total_iters_));
}

PolynomialScheduler::PolynomialScheduler(torch::optim::Optimizer& optimizer, int64_t total_iters,
                                         double power)
    : Scheduler(optimizer), total_iters_(total_iters), power_(power) {
  check(total_iters_);
  apply();
}
void PolynomialScheduler::check(int64_t total_iters) {
  config::check_argument(total_iters >= 1, "scheduler 'polynomial'", "total_iters",
                         "total_iters must be >= 1, got ", total_iters);
}
double PolynomialScheduler::lr_at(int64_t t, std::size_t, double base) const {
  const auto done = static_cast<double>(std::min(t, total_iters_));
  return base * std::pow(1.0 - done / static_cast<double>(total_iters_), power_);
}

ReduceOnPlateauScheduler::ReduceOnPlateauScheduler(torch::optim::Optimizer& optimizer, PlateauOptions options)
    : Scheduler(optimizer), options_(std::move(options)) {
  check_options(options_);
}

void check_options(const PlateauOptions& o) {
  const char* what = "scheduler 'reduce_on_plateau'";
  config::check_argument(o.mode == "min" || o.mode == "max", what, "mode",
                         "mode must be 'min' or 'max', got '", o.mode, "'");
  config::check_argument(o.factor > 0 && o.factor < 1, what, "factor", "factor must be in (0, 1), got ",
                         o.factor);
  config::check_argument(o.patience >= 0, what, "patience", "patience must be >= 0, got ", o.patience);
  config::check_argument(o.cooldown >= 0, what, "cooldown", "cooldown must be >= 0, got ", o.cooldown);
}

bool ReduceOnPlateauScheduler::improves(double value) const {
  if (!best_) return true;
  return options_.mode == "min" ? value < *best_ * (1 - options_.threshold)
                                : value > *best_ * (1 + options_.threshold);
}

void ReduceOnPlateauScheduler::advance(std::optional<double> metric) {
  ++step_;
  if (improves(*metric)) {
    best_ = *metric;
    bad_steps_ = 0;
  } else {
    ++bad_steps_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_steps_ = 0;  // as torch: bad steps during cooldown do not count
  }
  if (bad_steps_ > options_.patience) {
    const auto current = lrs();
    for (std::size_t g = 0; g < current.size(); ++g) {
      set_lr(g, std::max(current[g] * options_.factor, options_.min_lr));
    }
    cooldown_left_ = options_.cooldown;
    bad_steps_ = 0;
  }
}

void ReduceOnPlateauScheduler::save_extra(c10::impl::GenericDict& out) const {
  out.insert("best", best_ ? c10::IValue(*best_) : c10::IValue());
  out.insert("bad_steps", bad_steps_);
  out.insert("cooldown_left", cooldown_left_);
}

void ReduceOnPlateauScheduler::load_extra(const c10::impl::GenericDict& in) {
  const auto best = state_entry(in, "best");
  best_ = best.isNone() ? std::nullopt : std::optional<double>(state_number(best, "best", /*finite=*/false));
  bad_steps_ = state_integer(in, "bad_steps");
  cooldown_left_ = state_integer(in, "cooldown_left");
}

}  // namespace oml::optim
