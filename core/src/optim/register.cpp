#include "oml/optim/register.h"

#include <torch/torch.h>

#include "oml/config/argument_error.h"
#include "oml/config/reader.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/schedulers.h"
#include "oml/registry/registries.h"

namespace oml::optim {
namespace {

using OptimizerPtr = std::shared_ptr<torch::optim::Optimizer>;

// One group for the model, one for the loss's parameters (with `loss_lr`).
template <class Optimizer, class Options>
OptimizerPtr build(const OptimizerContext& ctx, const Options& options, std::optional<double> loss_lr,
                   const std::string& name) {
  OML_CHECK(!ctx.model_parameters.empty(), ConfigError, "optimizer '", name,
            "': the model has no parameters");
  config::check_argument(options.lr() > 0, "optimizer '" + name + "'", "lr", "lr must be > 0, got ",
                         options.lr());
  config::check_argument(!loss_lr || *loss_lr > 0, "optimizer '" + name + "'", "loss_lr",
                         "loss_lr must be > 0, got ", loss_lr.value_or(0.0));
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(ctx.model_parameters, std::make_unique<Options>(options));
  if (!ctx.loss_parameters.empty()) {
    auto loss_options = std::make_unique<Options>(options);
    loss_options->lr(loss_lr.value_or(options.lr()));
    groups.emplace_back(ctx.loss_parameters, std::move(loss_options));
  }
  return std::make_shared<Optimizer>(std::move(groups), options);
}

std::pair<double, double> betas(const std::vector<double>& v, const config::MapReader& r,
                                const std::string& name) {
  if (v.size() != 2) r.node()["betas"].fail("expected two numbers [beta1, beta2]");
  for (const double beta : v) {
    config::check_argument(beta >= 0 && beta < 1, "optimizer '" + name + "'", "betas",
                           "betas must be in [0, 1), got ", beta);
  }
  return {v[0], v[1]};
}

// LibTorch rejects these too, but its messages name neither the optimizer nor the key.
void check_non_negative(const std::string& name, std::initializer_list<std::pair<const char*, double>> args) {
  for (const auto& [key, value] : args) {
    config::check_argument(value >= 0, "optimizer '" + name + "'", key, key, " must be >= 0, got ", value);
  }
}

torch::optim::Optimizer& optimizer_of(const SchedulerContext& ctx, const std::string& name) {
  OML_ASSERT(ctx.optimizer != nullptr, "scheduler '", name, "' built without an optimizer");
  return *ctx.optimizer;
}

}  // namespace

void register_builtin_optim(Registries& reg) {
  reg.optimizers.add(
      "sgd",
      [](const config::Node& args, const OptimizerContext& ctx) -> OptimizerPtr {
        double lr = 1e-2, momentum = 0, dampening = 0, weight_decay = 0;
        bool nesterov = false;
        std::optional<double> loss_lr;
        config::MapReader r(args, "optimizer 'sgd' args");
        r.optional("lr", lr).optional("momentum", momentum).optional("dampening", dampening);
        r.optional("weight_decay", weight_decay).optional("nesterov", nesterov).optional("loss_lr", loss_lr);
        r.finish();
        check_non_negative(
            "sgd", {{"momentum", momentum}, {"dampening", dampening}, {"weight_decay", weight_decay}});
        config::check_argument(!nesterov || (momentum > 0 && dampening == 0), "optimizer 'sgd'", "nesterov",
                               "nesterov needs momentum > 0 and dampening 0, got momentum ", momentum,
                               " and dampening ", dampening);
        auto o = torch::optim::SGDOptions(lr)
                     .momentum(momentum)
                     .dampening(dampening)
                     .weight_decay(weight_decay)
                     .nesterov(nesterov);
        return build<torch::optim::SGD>(ctx, o, loss_lr, "sgd");
      },
      "stochastic gradient descent (momentum, nesterov)");
  for (const std::string name : {"adam", "adamw"}) {
    reg.optimizers.add(
        name,
        [name](const config::Node& args, const OptimizerContext& ctx) -> OptimizerPtr {
          double lr = 1e-3, eps = 1e-8, weight_decay = name == "adamw" ? 1e-2 : 0.0;
          std::vector<double> b{0.9, 0.999};
          bool amsgrad = false;
          std::optional<double> loss_lr;
          config::MapReader r(args, "optimizer '" + name + "' args");
          r.optional("lr", lr)
              .optional("betas", b)
              .optional("eps", eps)
              .optional("weight_decay", weight_decay);
          r.optional("amsgrad", amsgrad).optional("loss_lr", loss_lr);
          r.finish();
          const auto bb = betas(b, r, name);
          check_non_negative(name, {{"eps", eps}, {"weight_decay", weight_decay}});
          if (name == "adam") {
            auto o = torch::optim::AdamOptions(lr)
                         .betas({bb.first, bb.second})
                         .eps(eps)
                         .weight_decay(weight_decay)
                         .amsgrad(amsgrad);
            return build<torch::optim::Adam>(ctx, o, loss_lr, name);
          }
          auto o = torch::optim::AdamWOptions(lr)
                       .betas({bb.first, bb.second})
                       .eps(eps)
                       .weight_decay(weight_decay)
                       .amsgrad(amsgrad);
          return build<torch::optim::AdamW>(ctx, o, loss_lr, name);
        },
        name == "adam" ? "Adam (L2 weight decay in the gradient)" : "AdamW (decoupled weight decay)");
  }
  reg.optimizers.add(
      "rmsprop",
      [](const config::Node& args, const OptimizerContext& ctx) -> OptimizerPtr {
        double lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
        bool centered = false;
        std::optional<double> loss_lr;
        config::MapReader r(args, "optimizer 'rmsprop' args");
        r.optional("lr", lr)
            .optional("alpha", alpha)
            .optional("eps", eps)
            .optional("weight_decay", weight_decay);
        r.optional("momentum", momentum).optional("centered", centered).optional("loss_lr", loss_lr);
        r.finish();
        check_non_negative(
            "rmsprop",
            {{"alpha", alpha}, {"eps", eps}, {"weight_decay", weight_decay}, {"momentum", momentum}});
        auto o = torch::optim::RMSpropOptions(lr)
                     .alpha(alpha)
                     .eps(eps)
                     .weight_decay(weight_decay)
                     .momentum(momentum)
                     .centered(centered);
        return build<torch::optim::RMSprop>(ctx, o, loss_lr, "rmsprop");
      },
      "RMSprop");
  reg.optimizers.add(
      "adagrad",
      [](const config::Node& args, const OptimizerContext& ctx) -> OptimizerPtr {
        double lr = 1e-2, lr_decay = 0, weight_decay = 0, initial = 0, eps = 1e-10;
        std::optional<double> loss_lr;
        config::MapReader r(args, "optimizer 'adagrad' args");
        r.optional("lr", lr).optional("lr_decay", lr_decay).optional("weight_decay", weight_decay);
        r.optional("initial_accumulator_value", initial).optional("eps", eps).optional("loss_lr", loss_lr);
        r.finish();
        check_non_negative("adagrad", {{"lr_decay", lr_decay},
                                       {"weight_decay", weight_decay},
                                       {"initial_accumulator_value", initial},
                                       {"eps", eps}});
        auto o = torch::optim::AdagradOptions(lr)
                     .lr_decay(lr_decay)
                     .weight_decay(weight_decay)
                     .initial_accumulator_value(initial)
                     .eps(eps);
        return build<torch::optim::Adagrad>(ctx, o, loss_lr, "adagrad");
      },
      "Adagrad");

  reg.schedulers.add(
      "step",
      [](const config::Node& args, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        int64_t step_size = 0;
        double gamma = 0.1;
        config::MapReader r(args, "scheduler 'step' args");
        r.required("step_size", step_size).optional("gamma", gamma);
        r.finish();
        return std::make_shared<StepScheduler>(optimizer_of(ctx, "step"), step_size, gamma);
      },
      "lr * gamma every step_size steps");
  reg.schedulers.add(
      "multi_step",
      [](const config::Node& args, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        std::vector<int64_t> milestones;
        double gamma = 0.1;
        config::MapReader r(args, "scheduler 'multi_step' args");
        r.required("milestones", milestones).optional("gamma", gamma);
        r.finish();
        return std::make_shared<MultiStepScheduler>(optimizer_of(ctx, "multi_step"), milestones, gamma);
      },
      "lr * gamma at each milestone");
  reg.schedulers.add(
      "exponential",
      [](const config::Node& args, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        double gamma = 0;
        config::MapReader r(args, "scheduler 'exponential' args");
        r.required("gamma", gamma);
        r.finish();
        return std::make_shared<ExponentialScheduler>(optimizer_of(ctx, "exponential"), gamma);
      },
      "lr * gamma every step");
  reg.schedulers.add(
      "cosine_annealing",
      [](const config::Node& args, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        int64_t t_max = ctx.total_steps, warmup = 0;
        double eta_min = 0, warmup_start_factor = 0.1;
        config::MapReader r(args, "scheduler 'cosine_annealing' args");
        r.optional("T_max", t_max).optional("eta_min", eta_min).optional("warmup_steps", warmup);
        r.optional("warmup_start_factor", warmup_start_factor);
        r.finish();
        if (!r.has("T_max")) {
          // T_max is derived, so its error would name a key the user never wrote.
          config::check_argument(
              t_max > warmup, "scheduler 'cosine_annealing'", "warmup_steps", "warmup_steps (", warmup,
              ") covers the whole run: the scheduler steps ", t_max,
              " times (max_steps, or max_epochs x batches per epoch on each rank, divided by "
              "scheduler_frequency), leaving no steps to decay over; lower warmup_steps, "
              "train longer or set T_max");
          t_max -= warmup;
        }
        return std::make_shared<CosineAnnealingScheduler>(optimizer_of(ctx, "cosine_annealing"), t_max,
                                                          eta_min, warmup, warmup_start_factor);
      },
      "cosine decay to eta_min, optional linear warm-up");
  reg.schedulers.add(
      "one_cycle",
      [](const config::Node& args, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        int64_t total = ctx.total_steps;
        double pct_start = 0.3, div_factor = 25, final_div_factor = 1e4;
        config::MapReader r(args, "scheduler 'one_cycle' args");
        r.optional("total_steps", total).optional("pct_start", pct_start).optional("div_factor", div_factor);
        r.optional("final_div_factor", final_div_factor);
        r.finish();
        return std::make_shared<OneCycleScheduler>(optimizer_of(ctx, "one_cycle"), total, pct_start,
                                                   div_factor, final_div_factor);
      },
      "one-cycle policy (warm up to the optimizer's lr, anneal down)");
  reg.schedulers.add(
      "reduce_on_plateau",
      [](const config::Node& args, const SchedulerContext& ctx) -> std::shared_ptr<Scheduler> {
        PlateauOptions o;
        config::MapReader r(args, "scheduler 'reduce_on_plateau' args");
        r.optional("mode", o.mode).optional("factor", o.factor).optional("patience", o.patience);
        r.optional("threshold", o.threshold).optional("cooldown", o.cooldown).optional("min_lr", o.min_lr);
        r.finish();
        return std::make_shared<ReduceOnPlateauScheduler>(optimizer_of(ctx, "reduce_on_plateau"), o);
      },
      "lr * factor when the monitored metric stops improving");
}

}  // namespace oml::optim
