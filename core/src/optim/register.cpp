#include "oml/optim/register.h"

#include <torch/torch.h>

#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/schedulers.h"
#include "oml/registry/registries.h"

namespace oml::optim {
namespace {

using OptimizerPtr = std::shared_ptr<torch::optim::Optimizer>;

// What every optimizer reads besides its own hyper-parameters.
struct Common {
  double lr;
  std::optional<double> loss_lr;  ///< lr of the loss's parameters (default: lr)
};

void read_common(config::ArgsReader& r, Common& c) { r.optional("lr", c.lr).optional("loss_lr", c.loss_lr); }

// lr and loss_lr > 0, and `non_negative` >= 0 (LibTorch rejects these too, but its messages
// name neither the optimizer nor the key).
void check_values(const std::string& who, const Common& c,
                  std::initializer_list<std::pair<const char*, double>> non_negative) {
  config::check_argument(c.lr > 0, who, "lr", "lr must be > 0, got ", c.lr);
  config::check_argument(!c.loss_lr || *c.loss_lr > 0, who, "loss_lr", "loss_lr must be > 0, got ",
                         c.loss_lr.value_or(0.0));
  for (const auto& [key, value] : non_negative) {
    config::check_argument(value >= 0, who, key, key, " must be >= 0, got ", value);
  }
}

// One group for the model, one for the loss's parameters (with `loss_lr`).
template <class Optimizer, class Options>
OptimizerPtr build(const OptimizerContext& ctx, const Options& options, const Common& common,
                   const std::string& name) {
  OML_CHECK(!ctx.model_parameters.empty(), UsageError, "optimizer '", name, "': the model has no parameters");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(ctx.model_parameters, std::make_unique<Options>(options));
  if (!ctx.loss_parameters.empty()) {
    auto loss_options = std::make_unique<Options>(options);
    loss_options->lr(common.loss_lr.value_or(common.lr));
    groups.emplace_back(ctx.loss_parameters, std::move(loss_options));
  }
  return std::make_shared<Optimizer>(std::move(groups), options);
}

struct SgdArgs {
  Common common{1e-2, std::nullopt};
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

struct AdamArgs {
  Common common{1e-3, std::nullopt};
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8, weight_decay = 0;
  bool amsgrad = false;
};

struct RmspropArgs {
  Common common{1e-2, std::nullopt};
  double alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false;
};

struct AdagradArgs {
  Common common{1e-2, std::nullopt};
  double lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
};

struct StepArgs {
  int64_t step_size = 0;
  double gamma = 0.1;
};

struct MultiStepArgs {
  std::vector<int64_t> milestones;
  double gamma = 0.1;
};

struct CosineArgs {
  std::optional<int64_t> t_max;  ///< default: the run's scheduler steps minus the warm-up
  double eta_min = 0, warmup_start_factor = 0.1;
  int64_t warmup_steps = 0;
};

struct OneCycleArgs {
  std::optional<int64_t> total_steps;  ///< default: the run's scheduler steps
  double pct_start = 0.3, div_factor = 25, final_div_factor = 1e4;
};

torch::optim::Optimizer& optimizer_of(const SchedulerContext& ctx, const std::string& name) {
  OML_ASSERT(ctx.optimizer != nullptr, "scheduler '", name, "' built without an optimizer");
  return *ctx.optimizer;
}

}  // namespace

void register_builtin_optim(Registries& reg) {
  reg.optimizers.add(
      "sgd",
      [](config::ArgsReader& r) {
        SgdArgs a;
        read_common(r, a.common);
        r.optional("momentum", a.momentum).optional("dampening", a.dampening);
        r.optional("weight_decay", a.weight_decay).optional("nesterov", a.nesterov);
        r.check([&] {
          check_values(
              r.component(), a.common,
              {{"momentum", a.momentum}, {"dampening", a.dampening}, {"weight_decay", a.weight_decay}});
          config::check_argument(!a.nesterov || (a.momentum > 0 && a.dampening == 0), r.component(),
                                 "nesterov", "nesterov needs momentum > 0 and dampening 0, got momentum ",
                                 a.momentum, " and dampening ", a.dampening);
        });
        return a;
      },
      [](const SgdArgs& a, const OptimizerContext& ctx) -> OptimizerPtr {
        auto o = torch::optim::SGDOptions(a.common.lr)
                     .momentum(a.momentum)
                     .dampening(a.dampening)
                     .weight_decay(a.weight_decay)
                     .nesterov(a.nesterov);
        return build<torch::optim::SGD>(ctx, o, a.common, "sgd");
      },
      "stochastic gradient descent (momentum, nesterov)");
  for (const std::string name : {"adam", "adamw"}) {
    reg.optimizers.add(
        name,
        [name](config::ArgsReader& r) {
          AdamArgs a;
          if (name == "adamw") a.weight_decay = 1e-2;
          read_common(r, a.common);
          r.optional("betas", a.betas).optional("eps", a.eps).optional("weight_decay", a.weight_decay);
          r.optional("amsgrad", a.amsgrad);
          r.check([&] {
            check_values(r.component(), a.common, {{"eps", a.eps}, {"weight_decay", a.weight_decay}});
            config::check_argument(a.betas.size() == 2, r.component(), "betas",
                                   "expected two numbers [beta1, beta2], got ", a.betas.size());
            for (const double beta : a.betas) {
              config::check_argument(beta >= 0 && beta < 1, r.component(), "betas",
                                     "betas must be in [0, 1), got ", beta);
            }
          });
          return a;
        },
        [name](const AdamArgs& a, const OptimizerContext& ctx) -> OptimizerPtr {
          if (name == "adam") {
            auto o = torch::optim::AdamOptions(a.common.lr)
                         .betas({a.betas[0], a.betas[1]})
                         .eps(a.eps)
                         .weight_decay(a.weight_decay)
                         .amsgrad(a.amsgrad);
            return build<torch::optim::Adam>(ctx, o, a.common, name);
          }
          auto o = torch::optim::AdamWOptions(a.common.lr)
                       .betas({a.betas[0], a.betas[1]})
                       .eps(a.eps)
                       .weight_decay(a.weight_decay)
                       .amsgrad(a.amsgrad);
          return build<torch::optim::AdamW>(ctx, o, a.common, name);
        },
        name == "adam" ? "Adam (L2 weight decay in the gradient)" : "AdamW (decoupled weight decay)");
  }
  reg.optimizers.add(
      "rmsprop",
      [](config::ArgsReader& r) {
        RmspropArgs a;
        read_common(r, a.common);
        r.optional("alpha", a.alpha).optional("eps", a.eps).optional("weight_decay", a.weight_decay);
        r.optional("momentum", a.momentum).optional("centered", a.centered);
        r.check([&] {
          check_values(r.component(), a.common,
                       {{"alpha", a.alpha},
                        {"eps", a.eps},
                        {"weight_decay", a.weight_decay},
                        {"momentum", a.momentum}});
        });
        return a;
      },
      [](const RmspropArgs& a, const OptimizerContext& ctx) -> OptimizerPtr {
        auto o = torch::optim::RMSpropOptions(a.common.lr)
                     .alpha(a.alpha)
                     .eps(a.eps)
                     .weight_decay(a.weight_decay)
                     .momentum(a.momentum)
                     .centered(a.centered);
        return build<torch::optim::RMSprop>(ctx, o, a.common, "rmsprop");
      },
      "RMSprop");
  reg.optimizers.add(
      "adagrad",
      [](config::ArgsReader& r) {
        AdagradArgs a;
        read_common(r, a.common);
        r.optional("lr_decay", a.lr_decay).optional("weight_decay", a.weight_decay);
        r.optional("initial_accumulator_value", a.initial_accumulator_value).optional("eps", a.eps);
        r.check([&] {
          check_values(r.component(), a.common,
                       {{"lr_decay", a.lr_decay},
                        {"weight_decay", a.weight_decay},
                        {"initial_accumulator_value", a.initial_accumulator_value},
                        {"eps", a.eps}});
        });
        return a;
      },
      [](const AdagradArgs& a, const OptimizerContext& ctx) -> OptimizerPtr {
        auto o = torch::optim::AdagradOptions(a.common.lr)
                     .lr_decay(a.lr_decay)
                     .weight_decay(a.weight_decay)
                     .initial_accumulator_value(a.initial_accumulator_value)
                     .eps(a.eps);
        return build<torch::optim::Adagrad>(ctx, o, a.common, "adagrad");
      },
      "Adagrad");

  reg.schedulers.add(
      "step",
      [](config::ArgsReader& r) {
        StepArgs a;
        r.required("step_size", a.step_size).optional("gamma", a.gamma);
        r.check([&] { StepScheduler::check(a.step_size); });
        return a;
      },
      [](const StepArgs& a, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<StepScheduler>(optimizer_of(ctx, "step"), a.step_size, a.gamma);
      },
      "lr * gamma every step_size steps");
  reg.schedulers.add(
      "multi_step",
      [](config::ArgsReader& r) {
        MultiStepArgs a;
        r.required("milestones", a.milestones).optional("gamma", a.gamma);
        r.check([&] { MultiStepScheduler::check(a.milestones); });
        return a;
      },
      [](const MultiStepArgs& a, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<MultiStepScheduler>(optimizer_of(ctx, "multi_step"), a.milestones, a.gamma);
      },
      "lr * gamma at each milestone");
  reg.schedulers.add(
      "exponential",
      [](config::ArgsReader& r) {
        double gamma = 0;
        r.required("gamma", gamma);
        r.check([&] { ExponentialScheduler::check(gamma); });
        return gamma;
      },
      [](double gamma, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<ExponentialScheduler>(optimizer_of(ctx, "exponential"), gamma);
      },
      "lr * gamma every step");
  reg.schedulers.add(
      "cosine_annealing",
      [](config::ArgsReader& r) {
        CosineArgs a;
        r.optional("T_max", a.t_max).optional("eta_min", a.eta_min).optional("warmup_steps", a.warmup_steps);
        r.optional("warmup_start_factor", a.warmup_start_factor);
        r.check([&] { CosineAnnealingScheduler::check(a.t_max, a.warmup_steps, a.warmup_start_factor); });
        return a;
      },
      [](const CosineArgs& a, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        int64_t t_max = a.t_max.value_or(ctx.total_steps);
        if (!a.t_max) {
          // T_max is derived, so its error would name a key the user never wrote.
          config::check_fits(t_max > a.warmup_steps, "scheduler 'cosine_annealing'", "warmup_steps",
                             "warmup_steps (", a.warmup_steps, ") covers the whole run: the scheduler steps ",
                             t_max,
                             " times (max_steps, or max_epochs x batches per epoch on each rank, divided by "
                             "scheduler_frequency), leaving no steps to decay over; lower warmup_steps, "
                             "train longer or set T_max");
          t_max -= a.warmup_steps;
        }
        return std::make_shared<CosineAnnealingScheduler>(optimizer_of(ctx, "cosine_annealing"), t_max,
                                                          a.eta_min, a.warmup_steps, a.warmup_start_factor);
      },
      "cosine decay to eta_min, optional linear warm-up");
  reg.schedulers.add(
      "one_cycle",
      [](config::ArgsReader& r) {
        OneCycleArgs a;
        r.optional("total_steps", a.total_steps).optional("pct_start", a.pct_start);
        r.optional("div_factor", a.div_factor).optional("final_div_factor", a.final_div_factor);
        r.check(
            [&] { OneCycleScheduler::check(a.total_steps, a.pct_start, a.div_factor, a.final_div_factor); });
        return a;
      },
      [](const OneCycleArgs& a, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        const int64_t total = a.total_steps.value_or(ctx.total_steps);
        config::check_fits(
            total >= 2, "scheduler 'one_cycle'", "total_steps", "the run has ", total,
            " scheduler step(s) and a cycle needs at least 2; train longer or set total_steps");
        return std::make_shared<OneCycleScheduler>(optimizer_of(ctx, "one_cycle"), total, a.pct_start,
                                                   a.div_factor, a.final_div_factor);
      },
      "one-cycle policy (warm up to the optimizer's lr, anneal down)");
  reg.schedulers.add(
      "reduce_on_plateau",
      config::checked_parse<PlateauOptions>([](config::ArgsReader& r, PlateauOptions& o) {
        r.optional("mode", o.mode).optional("factor", o.factor).optional("patience", o.patience);
        r.optional("threshold", o.threshold).optional("cooldown", o.cooldown).optional("min_lr", o.min_lr);
      }),
      [](const PlateauOptions& o, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<ReduceOnPlateauScheduler>(optimizer_of(ctx, "reduce_on_plateau"), o);
      },
      "lr * factor when the monitored metric stops improving");
}

}  // namespace oml::optim
