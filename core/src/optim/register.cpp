#include "oml/optim/register.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/optim/formula_optimizers.h"
#include "oml/optim/multi_tensor.h"
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
  config::check_argument(c.lr > 0 && std::isfinite(c.lr), who, "lr", "lr must be a finite number > 0, got ",
                         c.lr);
  config::check_argument(!c.loss_lr || (*c.loss_lr > 0 && std::isfinite(*c.loss_lr)), who, "loss_lr",
                         "loss_lr must be a finite number > 0, got ", c.loss_lr.value_or(0.0));
  for (const auto& [key, value] : non_negative) {
    config::check_argument(value >= 0 && std::isfinite(value), who, key, key,
                           " must be a finite number >= 0, got ", value);
  }
}

// One group for the model, one for the loss's parameters (with `loss_lr`); `extra` follows the
// groups and the options in the optimizer's constructor.
template <class Optimizer, class Options, class... Extra>
OptimizerPtr build(const OptimizerContext& ctx, const Options& options, const Common& common,
                   const std::string& name, const Extra&... extra) {
  OML_CHECK(!ctx.model_parameters.empty(), UsageError, "optimizer '", name, "': the model has no parameters");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(ctx.model_parameters, std::make_unique<Options>(options));
  if (!ctx.loss_parameters.empty()) {
    auto loss_options = std::make_unique<Options>(options);
    loss_options->lr(common.loss_lr.value_or(common.lr));
    groups.emplace_back(ctx.loss_parameters, std::move(loss_options));
  }
  return std::make_shared<Optimizer>(std::move(groups), options, extra...);
}

// torch.optim's `foreach`, `fused` and `maximize` of Adam, AdamW and SGD (oml/optim/multi_tensor.h).
void read_kernel_flags(config::ArgsReader& r, KernelFlags& flags) {
  r.optional("foreach", flags.foreach).optional("fused", flags.fused).optional("maximize", flags.maximize);
}

// What torch.optim refuses at construction ("`fused` and `foreach` cannot be `True` together"),
// and `fused` where this LibTorch has no fused kernels.
void check_kernel_flags(const std::string& who, const KernelFlags& flags) {
  const std::string problem = kernel_flags_problem(flags);
  config::check_argument(problem.empty(), who, "fused", problem);
}

struct SgdArgs {
  Common common{1e-3, std::nullopt};  // torch.optim.SGD's default lr since 2.2
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  KernelFlags flags;  ///< foreach, fused, maximize
};

struct AdamArgs {
  Common common{1e-3, std::nullopt};
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8, weight_decay = 0;
  bool amsgrad = false;
  KernelFlags flags;  ///< foreach, fused, maximize
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

struct LinearArgs {
  double start_factor = 1.0 / 3, end_factor = 1.0;
  int64_t total_iters = 5;
};

struct PolynomialArgs {
  int64_t total_iters = 5;
  double power = 1.0;
};

// ---- the optimizers LibTorch lacks (formula_optimizers.h) -----------------------------------

// What a FormulaOptimizer's args become: torch.optim's hyper-parameters by name, tuples split
// into their two names (betas -> beta1, beta2), flags as 0/1.
struct FormulaArgs {
  Common common;
  std::map<std::string, double> values;
};

// One torch.optim argument: a number, a flag, or a two-number tuple read into two names.
struct FormulaArg {
  std::string name;
  std::vector<double> defaults;      ///< one value, or two for a tuple
  std::vector<std::string> parts{};  ///< a tuple's two names (empty: the value's name is `name`)
  bool flag = false;
};

void read_formula_args(config::ArgsReader& r, const std::vector<FormulaArg>& spec, FormulaArgs& a) {
  read_common(r, a.common);
  for (const FormulaArg& arg : spec) {
    if (arg.flag) {
      bool value = arg.defaults[0] != 0;
      r.optional(arg.name, value);
      a.values[arg.name] = value ? 1.0 : 0.0;
    } else if (arg.parts.empty()) {
      double value = arg.defaults[0];
      r.optional(arg.name, value);
      a.values[arg.name] = value;
    } else {
      std::vector<double> pair = arg.defaults;
      r.optional(arg.name, pair);
      if (pair.size() != 2) pair.resize(2, std::nan(""));  // reported by the check below
      a.values[arg.parts[0]] = pair[0];
      a.values[arg.parts[1]] = pair[1];
    }
  }
}

// The value checks torch.optim's constructors make (lr > 0 as for the other optimizers here).
void check_formula_args(const std::string& who, const std::string& name, const FormulaArgs& a) {
  check_values(who, a.common, {});
  const auto& v = a.values;
  const auto non_negative = [&](const char* key) {
    config::check_argument(v.at(key) >= 0 && std::isfinite(v.at(key)), who, key, key,
                           " must be a finite number >= 0, got ", v.at(key));
  };
  const auto beta = [&](const char* part) {
    config::check_argument(v.at(part) >= 0 && v.at(part) < 1, who, "betas",
                           "expected two numbers [beta1, beta2] in [0, 1), got ", part, " = ", v.at(part));
  };
  if (v.count("weight_decay")) non_negative("weight_decay");
  if (v.count("eps")) non_negative("eps");
  if (v.count("beta1")) {
    beta("beta1");
    beta("beta2");
  }
  if (name == "adadelta") {
    config::check_argument(v.at("rho") >= 0 && v.at("rho") <= 1, who, "rho", "rho must be in [0, 1], got ",
                           v.at("rho"));
  } else if (name == "nadam") {
    non_negative("momentum_decay");
  } else if (name == "rprop") {
    config::check_argument(0 < v.at("etaminus") && v.at("etaminus") < 1 && 1 < v.at("etaplus"), who, "etas",
                           "expected [etaminus, etaplus] with 0 < etaminus < 1 < etaplus, got [",
                           v.at("etaminus"), ", ", v.at("etaplus"), "]");
    config::check_argument(0 <= v.at("step_size_min") && v.at("step_size_min") <= v.at("step_size_max"), who,
                           "step_sizes", "expected [min, max] with 0 <= min <= max, got [",
                           v.at("step_size_min"), ", ", v.at("step_size_max"), "]");
  }
}

// A FormulaOptimizer with its rule fixed, constructible as build() constructs LibTorch's.
template <const UpdateRule& rule>
class RuleOptimizer : public FormulaOptimizer {
 public:
  RuleOptimizer(std::vector<torch::optim::OptimizerParamGroup> groups, const NamedOptions& defaults)
      : FormulaOptimizer(std::move(groups), defaults, rule) {}
};

template <const UpdateRule& rule>
void add_formula_optimizer(Registries& reg, const std::string& name, double default_lr,
                           std::vector<FormulaArg> spec, const std::string& help) {
  reg.optimizers.add(
      name,
      [name, default_lr, spec](config::ArgsReader& r) {
        FormulaArgs a;
        a.common = {default_lr, std::nullopt};
        read_formula_args(r, spec, a);
        r.check([&] { check_formula_args(r.component(), name, a); });
        return a;
      },
      [name](const FormulaArgs& a, const OptimizerContext& ctx) -> OptimizerPtr {
        auto values = a.values;
        values["lr"] = a.common.lr;
        return build<RuleOptimizer<rule>>(ctx, NamedOptions(values), a.common, name);
      },
      help);
}

void register_formula_optimizers(Registries& reg) {
  const FormulaArg weight_decay{"weight_decay", {0.0}};
  const FormulaArg maximize{"maximize", {0.0}, {}, true};
  const FormulaArg betas{"betas", {0.9, 0.999}, {"beta1", "beta2"}};
  const FormulaArg decoupled{"decoupled_weight_decay", {0.0}, {}, true};
  add_formula_optimizer<adadelta_rule>(reg, "adadelta", 1.0,
                                       {{"rho", {0.9}}, {"eps", {1e-6}}, weight_decay, maximize},
                                       "Adadelta (torch.optim.Adadelta)");
  add_formula_optimizer<adamax_rule>(reg, "adamax", 2e-3, {betas, {"eps", {1e-8}}, weight_decay, maximize},
                                     "Adamax: Adam with the infinity norm (torch.optim.Adamax)");
  add_formula_optimizer<asgd_rule>(
      reg, "asgd", 1e-2, {{"lambd", {1e-4}}, {"alpha", {0.75}}, {"t0", {1e6}}, weight_decay, maximize},
      "averaged SGD (torch.optim.ASGD)");
  add_formula_optimizer<rprop_rule>(reg, "rprop", 1e-2,
                                    {{"etas", {0.5, 1.2}, {"etaminus", "etaplus"}},
                                     {"step_sizes", {1e-6, 50}, {"step_size_min", "step_size_max"}},
                                     maximize},
                                    "resilient backpropagation (torch.optim.Rprop)");
  add_formula_optimizer<nadam_rule>(
      reg, "nadam", 2e-3,
      {betas, {"eps", {1e-8}}, weight_decay, {"momentum_decay", {4e-3}}, decoupled, maximize},
      "Adam with Nesterov momentum (torch.optim.NAdam)");
  add_formula_optimizer<radam_rule>(reg, "radam", 1e-3,
                                    {betas, {"eps", {1e-8}}, weight_decay, decoupled, maximize},
                                    "rectified Adam (torch.optim.RAdam)");
}

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
        read_kernel_flags(r, a.flags);
        r.check([&] {
          check_values(
              r.component(), a.common,
              {{"momentum", a.momentum}, {"dampening", a.dampening}, {"weight_decay", a.weight_decay}});
          config::check_argument(!a.nesterov || (a.momentum > 0 && a.dampening == 0), r.component(),
                                 "nesterov", "nesterov needs momentum > 0 and dampening 0, got momentum ",
                                 a.momentum, " and dampening ", a.dampening);
          check_kernel_flags(r.component(), a.flags);
        });
        return a;
      },
      [](const SgdArgs& a, const OptimizerContext& ctx) -> OptimizerPtr {
        auto o = torch::optim::SGDOptions(a.common.lr)
                     .momentum(a.momentum)
                     .dampening(a.dampening)
                     .weight_decay(a.weight_decay)
                     .nesterov(a.nesterov);
        return build<MultiTensorSGD>(ctx, o, a.common, "sgd", a.flags);
      },
      "stochastic gradient descent (momentum, nesterov; foreach, fused)");
  for (const std::string name : {"adam", "adamw"}) {
    reg.optimizers.add(
        name,
        [name](config::ArgsReader& r) {
          AdamArgs a;
          if (name == "adamw") a.weight_decay = 1e-2;
          read_common(r, a.common);
          r.optional("betas", a.betas).optional("eps", a.eps).optional("weight_decay", a.weight_decay);
          r.optional("amsgrad", a.amsgrad);
          read_kernel_flags(r, a.flags);
          r.check([&] {
            check_values(r.component(), a.common, {{"eps", a.eps}, {"weight_decay", a.weight_decay}});
            config::check_argument(a.betas.size() == 2, r.component(), "betas",
                                   "expected two numbers [beta1, beta2], got ", a.betas.size());
            for (const double beta : a.betas) {
              config::check_argument(beta >= 0 && beta < 1, r.component(), "betas",
                                     "betas must be in [0, 1), got ", beta);
            }
            check_kernel_flags(r.component(), a.flags);
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
            return build<MultiTensorAdam>(ctx, o, a.common, name, a.flags);
          }
          auto o = torch::optim::AdamWOptions(a.common.lr)
                       .betas({a.betas[0], a.betas[1]})
                       .eps(a.eps)
                       .weight_decay(a.weight_decay)
                       .amsgrad(a.amsgrad);
          return build<MultiTensorAdamW>(ctx, o, a.common, name, a.flags);
        },
        name == "adam" ? "Adam (L2 weight decay in the gradient; foreach, fused)"
                       : "AdamW (decoupled weight decay; foreach, fused)");
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
  register_formula_optimizers(reg);

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
        OneCycleOptions o;
        r.optional("max_lr", o.max_lr)
            .optional("total_steps", o.total_steps)
            .optional("pct_start", o.pct_start);
        r.optional("anneal_strategy", o.anneal_strategy).optional("cycle_momentum", o.cycle_momentum);
        r.optional("base_momentum", o.base_momentum).optional("max_momentum", o.max_momentum);
        r.optional("div_factor", o.div_factor).optional("final_div_factor", o.final_div_factor);
        r.optional("three_phase", o.three_phase);
        r.check([&] { OneCycleScheduler::check(o); });
        return o;
      },
      [](const OneCycleOptions& o, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        const int64_t total = o.total_steps.value_or(ctx.total_steps);
        config::check_fits(
            total >= 2, "scheduler 'one_cycle'", "total_steps", "the run has ", total,
            " scheduler step(s) and a cycle needs at least 2; train longer or set total_steps");
        return std::make_shared<OneCycleScheduler>(optimizer_of(ctx, "one_cycle"), total, o);
      },
      "one-cycle policy (torch's OneCycleLR: warm up to max_lr, anneal down; momentum the other way)");
  reg.schedulers.add(
      "cyclic",
      [](config::ArgsReader& r) {
        CyclicOptions o;
        r.required("base_lr", o.base_lr).required("max_lr", o.max_lr);
        r.optional("step_size_up", o.step_size_up).optional("step_size_down", o.step_size_down);
        r.optional("mode", o.mode).optional("gamma", o.gamma).optional("scale_mode", o.scale_mode);
        r.optional("cycle_momentum", o.cycle_momentum).optional("base_momentum", o.base_momentum);
        r.optional("max_momentum", o.max_momentum);
        r.check([&] { CyclicScheduler::check(o); });
        return o;
      },
      [](const CyclicOptions& o, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<CyclicScheduler>(optimizer_of(ctx, "cyclic"), o);
      },
      "cyclical lr between base_lr and max_lr (torch's CyclicLR)");
  reg.schedulers.add(
      "linear",
      [](config::ArgsReader& r) {
        LinearArgs a;
        r.optional("start_factor", a.start_factor).optional("end_factor", a.end_factor);
        r.optional("total_iters", a.total_iters);
        r.check([&] { LinearScheduler::check(a.start_factor, a.end_factor, a.total_iters); });
        return a;
      },
      [](const LinearArgs& a, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<LinearScheduler>(optimizer_of(ctx, "linear"), a.start_factor, a.end_factor,
                                                 a.total_iters);
      },
      "linear warm-up: lr x start_factor to lr x end_factor over total_iters steps (torch's LinearLR)");
  reg.schedulers.add(
      "polynomial",
      [](config::ArgsReader& r) {
        PolynomialArgs a;
        r.optional("total_iters", a.total_iters).optional("power", a.power);
        r.check([&] { PolynomialScheduler::check(a.total_iters); });
        return a;
      },
      [](const PolynomialArgs& a, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        return std::make_shared<PolynomialScheduler>(optimizer_of(ctx, "polynomial"), a.total_iters, a.power);
      },
      "lr x (1 - t / total_iters)^power (torch's PolynomialLR)");
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
