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
  const double tc = static_cast<double>(std::min(t - warmup_steps_, t_max_));
  return eta_min_ + (base - eta_min_) * (1 + std::cos(M_PI * tc / static_cast<double>(t_max_))) / 2;
}

OneCycleScheduler::OneCycleScheduler(torch::optim::Optimizer& optimizer, int64_t total_steps,
                                     double pct_start, double div_factor, double final_div_factor)
    : Scheduler(optimizer),
      total_steps_(total_steps),
      pct_start_(pct_start),
      div_factor_(div_factor),
      final_div_factor_(final_div_factor) {
  check(total_steps_, pct_start_, div_factor_, final_div_factor_);
  apply();
}
void OneCycleScheduler::check(std::optional<int64_t> total_steps, double pct_start, double div_factor,
                              double final_div_factor) {
  const char* what = "scheduler 'one_cycle'";
  config::check_argument(!total_steps || *total_steps >= 2, what, "total_steps",
                         "total_steps must be >= 2, got ", total_steps.value_or(0));
  config::check_argument(pct_start > 0 && pct_start < 1, what, "pct_start",
                         "pct_start must be in (0, 1), got ", pct_start);
  config::check_argument(div_factor > 0, what, "div_factor", "div_factor must be > 0, got ", div_factor);
  config::check_argument(final_div_factor > 0, what, "final_div_factor", "final_div_factor must be > 0, got ",
                         final_div_factor);
}
double OneCycleScheduler::lr_at(int64_t t, std::size_t, double max_lr) const {
  const auto anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2 * (1 + std::cos(M_PI * pct));
  };
  const double initial = max_lr / div_factor_;
  const double min_lr = initial / final_div_factor_;
  const double up_end = pct_start_ * static_cast<double>(total_steps_) - 1;
  const double down_end = static_cast<double>(total_steps_) - 1;
  const double tt = std::min(static_cast<double>(t), down_end);
  if (tt <= up_end) return anneal(initial, max_lr, up_end > 0 ? tt / up_end : 1.0);
  return anneal(max_lr, min_lr, (tt - up_end) / (down_end - up_end));
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
