// Optimizers, schedulers and resume state.
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/io/checkpoint.h"
#include "oml/optim/multi_tensor.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/optim/scheduler.h"
#include "oml/optim/schedulers.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"
#include "torch_compat.h"  // white box: the optimizer state's key on this LibTorch
#include "training/trainer.h"

namespace optim_tests {

using Catch::Matchers::Contains;
using namespace oml::optim;

namespace {

oml::config::ComponentSpec spec(const std::string& yaml) {
  static std::vector<oml::config::Document> keep;  // nodes refer to their document
  keep.push_back(oml::config::Document::from_string(yaml, "optim.yaml"));
  return oml::config::parse_component(keep.back().root()["c"], "c");
}

std::vector<double> lrs_over(Scheduler& s, int steps) {
  std::vector<double> out{s.lrs()[0]};
  for (int i = 0; i < steps; ++i) {
    s.step();
    out.push_back(s.lrs()[0]);
  }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i);
    CHECK(got[i] == Approx(expected[i]).margin(1e-12));
  }
}

struct Toy {
  torch::nn::Linear model{4, 2};
  torch::Tensor loss_weight = torch::zeros({2}, torch::requires_grad());
};

// Two copies of the same random parameters ([5, 4] and [3], from `seed`) for two optimizers
// stepped side by side on the same random gradients.
struct TwinParameters {
  std::vector<at::Tensor> start, ours, theirs;

  explicit TwinParameters(uint64_t seed) {
    torch::manual_seed(seed);
    start = {torch::randn({5, 4}), torch::randn({3})};
    for (const auto& t : start) {
      ours.push_back(t.clone().requires_grad_(true));
      theirs.push_back(t.clone().requires_grad_(true));
    }
  }

  /// One random gradient per parameter, the same on both copies.
  void give_gradients() {
    for (std::size_t i = 0; i < start.size(); ++i) {
      const at::Tensor grad = torch::randn(start[i].sizes());
      ours[i].mutable_grad() = grad.clone();
      theirs[i].mutable_grad() = grad.clone();
    }
  }
};

}  // namespace

TEST_CASE("Optimizers give the loss parameters their own learning rate", "[optim]") {
  oml::cli::register_builtins();
  Toy toy;
  OptimizerContext ctx{toy.model->parameters(), {toy.loss_weight}};
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "asgd",
                           "rprop", "nadam", "radam"}) {
    INFO(name);
    auto opt = oml::registries().optimizers.create(
        spec(std::string("c: {name: ") + name + ", args: {lr: 0.5, loss_lr: 0.25}}\n"), ctx);
    REQUIRE(opt->param_groups().size() == 2);
    CHECK(opt->param_groups()[0].options().get_lr() == 0.5);
    CHECK(opt->param_groups()[1].options().get_lr() == 0.25);
  }
  CHECK_THROWS_WITH(oml::registries().optimizers.create(spec("c: {name: adam, args: {betas: [0.9]}}\n"), ctx),
                    Contains("betas"));
  CHECK_THROWS_WITH(
      oml::registries().optimizers.create(spec("c: {name: nadam, args: {betas: [0.9]}}\n"), ctx),
      Contains("c.args.betas"));
  CHECK_THROWS_WITH(
      oml::registries().optimizers.create(spec("c: {name: rprop, args: {etas: [1.5, 0.5]}}\n"), ctx),
      Contains("c.args.etas"));
  CHECK_THROWS_WITH(oml::registries().optimizers.create(spec("c: {name: adadelta, args: {rho: 2}}\n"), ctx),
                    Contains("c.args.rho"));
  CHECK_THROWS_WITH(oml::registries().optimizers.create(spec("c: {name: radam, args: {lr: 0}}\n"), ctx),
                    Contains("c.args.lr"));
}

TEST_CASE("Bad optimizer and scheduler arguments point at their key", "[optim][schedulers]") {
  oml::cli::register_builtins();
  Toy toy;
  OptimizerContext ctx{toy.model->parameters(), {toy.loss_weight}};
  const auto optimizer_error = [&](const std::string& yaml) -> std::string {
    try {
      oml::registries().optimizers.create(spec("c: " + yaml + "\n"), ctx);
    } catch (const oml::ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  // optim.yaml:1:N: c.args.<key>: optimizer '<name>': ... — LibTorch's own checks name neither.
  CHECK_THAT(optimizer_error("{name: adam, args: {lr: 0}}"),
             Contains("optim.yaml:1:28: c.args.lr: optimizer 'adam': lr must be a finite number > 0, got 0"));
  CHECK_THAT(optimizer_error("{name: adam, args: {lr: .inf}}"),
             Contains("c.args.lr: optimizer 'adam': lr must be a finite number > 0, got inf"));
  CHECK_THAT(optimizer_error("{name: adamw, args: {weight_decay: .nan}}"), Contains("c.args.weight_decay"));
  CHECK_THAT(optimizer_error("{name: sgd, args: {loss_lr: -1}}"),
             Contains("c.args.loss_lr: optimizer 'sgd'"));
  CHECK_THAT(optimizer_error("{name: sgd, args: {momentum: -0.5}}"),
             Contains("c.args.momentum: optimizer 'sgd': momentum must be a finite number >= 0, got -0.5"));
  CHECK_THAT(optimizer_error("{name: sgd, args: {nesterov: true}}"), Contains("c.args.nesterov"));
  CHECK_THAT(optimizer_error("{name: adamw, args: {betas: [0.9, 1.5]}}"),
             Contains("c.args.betas: optimizer 'adamw': betas must be in [0, 1), got 1.5"));
  CHECK_THAT(optimizer_error("{name: rmsprop, args: {alpha: -1}}"), Contains("c.args.alpha"));
  CHECK_THAT(optimizer_error("{name: adagrad, args: {lr_decay: -1}}"), Contains("c.args.lr_decay"));
  CHECK_THAT(
      optimizer_error("{name: adam, args: {fused: true, foreach: true}}"),
      Contains("optim.yaml:1:31: c.args.fused: optimizer 'adam': fused and foreach cannot both be true"));

  auto optimizer = oml::registries().optimizers.create(spec("c: {name: sgd}\n"), ctx);
  SchedulerContext scheduler_ctx;
  scheduler_ctx.optimizer = optimizer.get();
  scheduler_ctx.total_steps = 10;
  const auto scheduler_error = [&](const std::string& yaml) -> std::string {
    try {
      oml::registries().schedulers.create(spec("c: " + yaml + "\n"), scheduler_ctx);
    } catch (const oml::Error& e) {  // a ConfigError, or a DataError for args that do not fit the run
      return e.what();
    }
    return "(no error)";
  };
  CHECK_THAT(scheduler_error("{name: step, args: {step_size: 0}}"),
             Contains("optim.yaml:1:35: c.args.step_size: scheduler 'step': step_size must be >= 1, got 0"));
  CHECK_THAT(scheduler_error("{name: multi_step, args: {milestones: [3, 1]}}"),
             Contains("c.args.milestones"));
  CHECK_THAT(scheduler_error("{name: exponential, args: {gamma: 0}}"), Contains("c.args.gamma"));
  CHECK_THAT(scheduler_error("{name: cosine_annealing, args: {warmup_start_factor: 2}}"),
             Contains("c.args.warmup_start_factor"));
  // T_max defaults to the run length minus the warm-up: the warm-up is the key to blame, with
  // the run length it had to fit in.
  CHECK_THAT(scheduler_error("{name: cosine_annealing, args: {warmup_steps: 10}}"),
             Contains("c.args.warmup_steps: scheduler 'cosine_annealing': warmup_steps (10) covers the whole "
                      "run: the scheduler steps 10 times"));
  // ... found by the build, which knows the run: a data error, not a config error.
  CHECK_THROWS_AS(oml::registries().schedulers.create(
                      spec("c: {name: cosine_annealing, args: {warmup_steps: 10}}\n"), scheduler_ctx),
                  oml::DataError);
  CHECK_THAT(scheduler_error("{name: cosine_annealing, args: {warmup_steps: 10, T_max: 0}}"),
             Contains("c.args.T_max") && Contains("T_max must be >= 1, got 0"));
  CHECK_THAT(scheduler_error("{name: one_cycle, args: {pct_start: 1}}"), Contains("c.args.pct_start"));
  CHECK_THAT(scheduler_error("{name: one_cycle, args: {anneal_strategy: exp}}"),
             Contains("c.args.anneal_strategy"));
  CHECK_THAT(scheduler_error("{name: cyclic, args: {max_lr: 0.1}}"),
             Contains("missing required key 'base_lr'"));
  CHECK_THAT(scheduler_error("{name: cyclic, args: {base_lr: 0.01, max_lr: 0.1, mode: sine}}"),
             Contains("c.args.mode"));
  CHECK_THAT(scheduler_error("{name: linear, args: {start_factor: 0}}"), Contains("c.args.start_factor"));
  CHECK_THAT(scheduler_error("{name: polynomial, args: {total_iters: 0}}"), Contains("c.args.total_iters"));
  CHECK_THAT(scheduler_error("{name: one_cycle, args: {final_div_factor: 0}}"),
             Contains("c.args.final_div_factor"));
  CHECK_THAT(scheduler_error("{name: reduce_on_plateau, args: {mode: up}}"), Contains("c.args.mode"));
  CHECK_THAT(scheduler_error("{name: reduce_on_plateau, args: {cooldown: -1}}"), Contains("c.args.cooldown"));
}

TEST_CASE("Closed-form schedulers follow their formulas", "[optim][schedulers]") {
  Toy toy;
  torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  StepScheduler step(sgd, 2, 0.5);
  check_close(lrs_over(step, 4), {1, 1, 0.5, 0.5, 0.25});
  torch::optim::SGD sgd2(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  MultiStepScheduler multi(sgd2, {1, 3}, 0.1);
  check_close(lrs_over(multi, 4), {1, 0.1, 0.1, 0.01, 0.01});
  torch::optim::SGD sgd3(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  // warm-up 0.1 -> 1 over 2 steps, then cosine over 4 steps to eta_min = 0 and, as torch's
  // CosineAnnealingLR, on: back up to the base lr over the next 4.
  CosineAnnealingScheduler cosine(sgd3, 4, 0.0, 2, 0.1);
  const double c = std::cos(M_PI / 4);
  check_close(lrs_over(cosine, 11), {0.1, 0.55, 1, (1 + c) / 2, 0.5, (1 - c) / 2, 0, (1 - c) / 2, 0.5,
                                     (1 + c) / 2, 1, (1 + c) / 2});
  torch::optim::SGD sgd4(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  // torch.optim.lr_scheduler.OneCycleLR(total_steps=10, pct_start=0.3): up for 2 steps, down for 7.
  OneCycleScheduler cycle(sgd4, 10, OneCycleOptions{});
  const auto lrs = lrs_over(cycle, 9);
  CHECK(lrs[0] == Approx(0.04));
  CHECK(lrs[1] == Approx(0.04 + (1 - 0.04) / 2));
  CHECK(lrs[2] == Approx(1.0));
  CHECK(lrs[9] == Approx(0.04 / 1e4));
}

TEST_CASE("The run's scheduler is told the steps the run trains, saturating instead of overflowing",
          "[optim][schedulers][config]") {
  oml::cli::register_builtins();
  Toy toy;
  std::vector<oml::config::Document> documents;  // a RunConfig's nodes refer to its document
  // `scheduling` adds to the scheduling section, `run` to the top level.
  const auto run_config = [&](const std::string& scheduling, const std::string& run) {
    documents.push_back(oml::config::Document::from_string(
        "optimizer: {name: sgd, args: {lr: 1.0}}\n"
        "scheduling: {scheduler: {name: one_cycle, args: {max_lr: 1.0}}, " +
            scheduling + "}\n" + run,
        "run.yaml"));
    oml::cli::Invocation invocation;
    invocation.command = "oml-train";
    return invocation.load_config(documents.back());
  };
  const auto lrs_of_run = [&](const oml::config::RunConfig& config, int64_t steps_per_epoch) {
    torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
    const auto scheduler = oml::pipelines::build_scheduler(config, sgd, steps_per_epoch);
    REQUIRE(scheduler != nullptr);
    return lrs_over(*scheduler, 12);
  };
  const auto lrs_of_cycle = [&](int64_t total_steps) {
    torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
    OneCycleScheduler cycle(sgd, total_steps, OneCycleOptions{});
    return lrs_over(cycle, 12);
  };

  // Per step: max_epochs x steps per epoch, or max_steps when smaller.
  const auto three_epochs = run_config("scheduler_interval: step", "max_epochs: 3\n");
  CHECK(oml::pipelines::total_training_steps(three_epochs, 5) == 15);
  check_close(lrs_of_run(three_epochs, 5), lrs_of_cycle(15));
  const auto capped = run_config("scheduler_interval: step", "max_epochs: 3\nmax_steps: 10\n");
  CHECK(oml::pipelines::total_training_steps(capped, 5) == 10);
  check_close(lrs_of_run(capped, 5), lrs_of_cycle(10));

  // max_epochs as large as int64 allows: the product saturates, and max_steps still ends the run.
  const auto endless =
      run_config("scheduler_interval: step", "max_epochs: 9223372036854775807\nmax_steps: 10\n");
  CHECK(oml::pipelines::total_training_steps(endless, 5) == 10);
  check_close(lrs_of_run(endless, 5), lrs_of_cycle(10));
  const auto unbounded = run_config("scheduler_interval: step", "max_epochs: 9223372036854775807\n");
  CHECK(oml::pipelines::total_training_steps(unbounded, 5) == std::numeric_limits<int64_t>::max());

  // Per epoch, every scheduler_frequency-th: max_epochs / frequency steps (here 1, too few).
  const auto every_second =
      run_config("scheduler_interval: epoch, scheduler_frequency: 2", "max_epochs: 3\n");
  torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  CHECK_THROWS_WITH(oml::pipelines::build_scheduler(every_second, sgd, 5),
                    Contains("the run has 1 scheduler step(s) and a cycle needs at least 2"));
}

TEST_CASE("Reduce-on-plateau lowers the lr after `patience` steps without improvement",
          "[optim][schedulers]") {
  Toy toy;
  torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  PlateauOptions o;
  o.mode = "max";
  o.patience = 1;
  o.factor = 0.5;
  ReduceOnPlateauScheduler plateau(sgd, o);
  std::vector<double> lrs;
  for (double metric : {1.0, 1.0, 1.0, 2.0, 2.0, 2.0}) {
    plateau.step(metric);
    lrs.push_back(plateau.lrs()[0]);
  }
  check_close(lrs, {1, 1, 0.5, 0.5, 0.5, 0.25});
  CHECK_THROWS_AS(plateau.step(), oml::UsageError);
  // The default mode is torch's, min (OML's configs leave it to torch): a rising metric is no
  // improvement.
  CHECK(PlateauOptions{}.mode == "min");
  torch::optim::SGD sgd_min(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  o.mode = PlateauOptions{}.mode;
  ReduceOnPlateauScheduler lower_is_better(sgd_min, o);
  lrs.clear();
  for (double metric : {2.0, 1.0, 1.5, 1.5, 0.5}) {
    lower_is_better.step(metric);
    lrs.push_back(lower_is_better.lrs()[0]);
  }
  check_close(lrs, {1, 1, 1, 0.5, 0.5});
}

TEST_CASE("Scheduler state survives a checkpoint round trip", "[optim][schedulers][io]") {
  Toy toy;
  torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  PlateauOptions o;
  o.patience = 0;
  ReduceOnPlateauScheduler plateau(sgd, o);
  plateau.step(1.0);
  plateau.step(0.5);
  oml::test::TempDir dir;
  oml::io::Checkpoint ckpt;
  ckpt.resume = oml::io::ResumeState{};
  ckpt.resume->scheduler = plateau.state();
  oml::io::save_checkpoint(dir / "s.ckpt", ckpt);
  const auto loaded = oml::io::load_checkpoint(dir / "s.ckpt");
  torch::optim::SGD sgd2(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  ReduceOnPlateauScheduler restored(sgd2, o);
  restored.load_state(loaded.resume->scheduler);
  CHECK(restored.lrs() == plateau.lrs());
  CHECK(restored.step_count() == 2);
  plateau.step(0.5);
  restored.step(0.5);
  CHECK(restored.lrs() == plateau.lrs());
  StepScheduler other(sgd2, 1, 0.5);
  CHECK_THROWS_WITH(other.load_state(loaded.resume->scheduler), Contains("reduce_on_plateau"));
}

TEST_CASE("A damaged scheduler state is a DataError naming the entry", "[optim][schedulers][io]") {
  Toy toy;
  torch::optim::SGD sgd(toy.model->parameters(), torch::optim::SGDOptions(1.0));
  ReduceOnPlateauScheduler plateau(sgd, PlateauOptions{});
  plateau.step(1.0);
  // The state with one entry replaced or left out, as a damaged checkpoint holds it.
  const auto with = [&](const std::string& key, const c10::IValue& value) {
    auto state = plateau.state().toGenericDict().copy();
    state.insert_or_assign(key, value);
    return c10::IValue(state);
  };
  const auto without = [&](const std::string& key) {
    auto state = plateau.state().toGenericDict().copy();
    REQUIRE(state.erase(key) == 1);
    return c10::IValue(state);
  };
  const auto refused = [&](const c10::IValue& state, const std::string& message) {
    CHECK_THROWS_AS(plateau.load_state(state), oml::DataError);
    CHECK_THROWS_WITH(plateau.load_state(state), Contains(message));
  };
  // Each of these was a c10::Error ("isList() INTERNAL ASSERT FAILED", exit 1) or an exception
  // from c10::Dict::at.
  refused(with("base_lrs", std::string("x")), "entry 'base_lrs' must be a list");
  refused(with("lrs", c10::List<std::string>({"a"})), "entry 'lrs' must hold numbers");
  refused(with("lrs", c10::List<double>({std::nan("")})), "expected a finite number");
  refused(with("step", 1.5), "entry 'step' must be an integer");
  refused(with("bad_steps", std::string("x")), "entry 'bad_steps' must be an integer");
  refused(without("cooldown_left"), "missing entry 'cooldown_left'");
  // What state() writes still loads: integers where floats were written, and a best of NaN.
  plateau.load_state(with("lrs", c10::List<int64_t>({1})));
  plateau.load_state(with("best", std::nan("")));
}

TEST_CASE("A damaged optimizer state is a DataError", "[optim][resume]") {
  Toy toy;
  torch::optim::Adam adam(toy.model->parameters(), torch::optim::AdamOptions(0.1));
  const at::Tensor saved = save_optimizer_state(adam);
  // The state is a TorchScript archive; code it cannot parse used to escape as a
  // torch::jit::ErrorReport, a plain std::exception (exit 1).
  auto records = oml::test::read_zip_records(
      std::string(static_cast<const char*>(saved.data_ptr()), static_cast<std::size_t>(saved.numel())));
  bool edited = false;
  for (auto& [name, data] : records) {
    if (name == "code/__torch__.py") {
      data = "class Module(Module):\n  x : int\n y : int\n";
      edited = true;
    }
  }
  REQUIRE(edited);
  const std::string damaged = oml::test::write_zip_records(records);
  auto bytes = torch::empty({static_cast<int64_t>(damaged.size())}, torch::kUInt8);
  std::memcpy(bytes.data_ptr(), damaged.data(), damaged.size());
  CHECK_THROWS_AS(load_optimizer_state(adam, bytes), oml::DataError);
  CHECK_THROWS_WITH(load_optimizer_state(adam, bytes), Contains("optimizer state is damaged"));

  // Code nested deep enough to overflow the parser's stack, its CRCs fixed: refused before
  // LibTorch compiles it. The state as saved passes the same check (below, and every resume).
  const auto with_code = [&](const std::string& code) {
    auto edited_records = records;
    for (auto& [name, data] : edited_records) {
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0) data = code;
    }
    const std::string zip = oml::test::write_zip_records(edited_records);
    auto out = torch::empty({static_cast<int64_t>(zip.size())}, torch::kUInt8);
    std::memcpy(out.data_ptr(), zip.data(), zip.size());
    return out;
  };
  CHECK_THROWS_WITH(
      load_optimizer_state(adam,
                           with_code("class Module(Module):\n  x : " + std::string(200000, '-') + "int\n")),
      Contains("optimizer state (") && Contains(".py): line 2: the character '-'"));
  std::string brackets = "class Module(Module):\n  x : ";
  for (int i = 0; i < 100000; ++i) brackets += "List[";
  CHECK_THROWS_WITH(load_optimizer_state(adam, with_code(brackets + "int\n")),
                    Contains("brackets nested deeper than 16"));
  std::string blocks = "class Module(Module):\n";
  for (int i = 1; i < 1000; ++i) blocks += std::string(static_cast<std::size_t>(i), ' ') + "if x:\n";
  CHECK_THROWS_WITH(load_optimizer_state(adam, with_code(blocks)), Contains("indentation deeper than 16"));
  CHECK_THROWS_WITH(load_optimizer_state(adam, with_code("class Module(Module):\n  x : \"open\n")),
                    Contains("an unterminated string"));
  CHECK_NOTHROW(load_optimizer_state(adam, saved));

  // Bytes flipped in that code without fixing the archive's CRCs: refused before LibTorch parses
  // them (damaged code has crashed its parser).
  std::string flipped(static_cast<const char*>(saved.data_ptr()), static_cast<std::size_t>(saved.numel()));
  const std::size_t code = flipped.find("class Module(Module):");
  REQUIRE(code != std::string::npos);
  flipped[code + 6] = '(';
  auto flipped_bytes = torch::empty({static_cast<int64_t>(flipped.size())}, torch::kUInt8);
  std::memcpy(flipped_bytes.data_ptr(), flipped.data(), flipped.size());
  CHECK_THROWS_AS(load_optimizer_state(adam, flipped_bytes), oml::DataError);
  CHECK_THROWS_WITH(load_optimizer_state(adam, flipped_bytes),
                    Contains("optimizer state") && Contains("is damaged (its CRC-32"));
}

TEST_CASE("Optimizer state of other shapes is refused when it is loaded, not at the first step",
          "[optim][resume]") {
  oml::cli::register_builtins();
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "asgd",
                           "rprop", "nadam", "radam"}) {
    INFO(name);
    // SGD and RMSprop keep state only with momentum.
    const std::string yaml =
        std::string("c: {name: ") + name +
        (std::string(name) == "sgd" || std::string(name) == "rmsprop" ? ", args: {momentum: 0.9}}\n" : "}\n");
    const auto make = [&](const std::vector<at::Tensor>& params) {
      return oml::registries().optimizers.create(spec(yaml), OptimizerContext{params, {}});
    };
    // Two parameters ([2, 4] and [2]) stepped once: every state tensor exists.
    std::vector<at::Tensor> params = {torch::randn({2, 4}, torch::requires_grad()),
                                      torch::randn({2}, torch::requires_grad())};
    const auto stepped = make(params);
    (params[0].sum() + params[1].pow(2).sum()).backward();
    stepped->step();
    const at::Tensor saved = save_optimizer_state(*stepped);
    // The same shapes load (and step on).
    std::vector<at::Tensor> same = {torch::randn({2, 4}, torch::requires_grad()),
                                    torch::randn({2}, torch::requires_grad())};
    const auto fits = make(same);
    CHECK_NOTHROW(load_optimizer_state(*fits, saved));
    // As many parameters of other shapes (a Linear(2, 4) for a Linear(4, 2)): refused here.
    std::vector<at::Tensor> other = {torch::randn({4, 2}, torch::requires_grad()),
                                     torch::randn({4}, torch::requires_grad())};
    const auto refuses = make(other);
    CHECK_THROWS_WITH(load_optimizer_state(*refuses, saved),
                      Contains("optimizer state does not fit these parameters") &&
                          Contains("parameter 0 of shape [4, 2] has") && Contains("of shape [2, 4]"));
  }
}

TEST_CASE("Resuming from a checkpoint whose config or position is damaged is exit 2", "[optim][resume]") {
  oml::cli::register_builtins();
  const auto document = oml::config::Document::from_string(
      "dataset_root: d\noptimizer: {name: adam, args: {lr: 0.1}}\n", "train.yaml");
  const auto config = oml::config::parse_run_config(document.root());
  Toy toy;
  torch::optim::Adam adam(toy.model->parameters(), torch::optim::AdamOptions(0.1));
  oml::pipelines::TrainingParts parts;
  parts.model = toy.model.ptr().get();
  parts.optimizer = &adam;
  oml::test::TempDir dir;
  const auto checkpoint = [&](const std::string& config_yaml, int64_t epoch) {
    oml::io::Checkpoint ckpt;
    ckpt.state_dict = oml::io::state_dict(*toy.model);
    ckpt.config = config_yaml;
    oml::io::ResumeState resume;
    resume.optimizer = save_optimizer_state(adam);
    resume.sampler_epoch = epoch;
    resume.rng = save_rng_state();
    resume.sampler_consumed = 0;
    resume.sampler_world_size = 1;
    ckpt.resume = std::move(resume);
    const auto path = (dir / "last.ckpt").string();
    oml::io::save_checkpoint(path, ckpt);
    return path;
  };
  const std::string good = "optimizer: {name: adam, args: {lr: 0.1}}\n";
  CHECK(oml::pipelines::restore_checkpoint(checkpoint(good, 2), config, parts, nullptr).position.epoch == 2);
  // A config that is YAML but not a mapping: yaml-cpp's BadSubscript escaped (exit 1).
  CHECK_THROWS_AS(oml::pipelines::restore_checkpoint(checkpoint("5", 2), config, parts, nullptr),
                  oml::ConfigError);
  const auto negative = checkpoint(good, -2147483648LL);
  CHECK_THROWS_AS(oml::pipelines::restore_checkpoint(negative, config, parts, nullptr), oml::DataError);
  CHECK_THROWS_WITH(oml::pipelines::restore_checkpoint(negative, config, parts, nullptr),
                    Contains("last.ckpt") && Contains("epoch -2147483648"));
}

TEST_CASE("N steps, save, restore, M steps equals N + M uninterrupted steps", "[optim][resume]") {
  // Each step draws its batch from the global generator, so the RNG state must be restored too.
  const auto run_steps = [](torch::nn::Linear& model, torch::optim::Optimizer& opt, Scheduler& sched, int n) {
    std::vector<double> losses;
    for (int i = 0; i < n; ++i) {
      const auto x = torch::randn({8, 4});
      const auto loss = (model->forward(torch::dropout(x, 0.2, true)) - 1).pow(2).mean();
      opt.zero_grad();
      loss.backward();
      opt.step();
      sched.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  const auto make = [](torch::nn::Linear& model) {
    return std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.05));
  };

  torch::manual_seed(11);
  torch::nn::Linear model(4, 2);
  auto opt = make(model);
  StepScheduler sched(*opt, 3, 0.5);
  run_steps(model, *opt, sched, 5);
  oml::test::TempDir dir;
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = oml::io::state_dict(*model);
  oml::io::ResumeState resume;
  resume.optimizer = save_optimizer_state(*opt);
  resume.scheduler = sched.state();
  resume.sampler_batch = 5;
  resume.rng = save_rng_state();
  resume.sampler_consumed = 10;
  resume.sampler_world_size = 2;
  ckpt.resume = std::move(resume);
  oml::io::save_checkpoint(dir / "last.ckpt", ckpt);
  const auto uninterrupted = run_steps(model, *opt, sched, 4);

  torch::manual_seed(999);  // a fresh process: other weights, other generator state
  torch::nn::Linear resumed(4, 2);
  auto opt2 = make(resumed);
  StepScheduler sched2(*opt2, 3, 0.5);
  const auto loaded = oml::io::load_checkpoint(dir / "last.ckpt");
  oml::io::load_state_dict(*resumed, loaded.state_dict, "last.ckpt");
  load_optimizer_state(*opt2, loaded.resume->optimizer);
  sched2.load_state(loaded.resume->scheduler);
  load_rng_state(loaded.resume->rng);
  CHECK(loaded.resume->sampler_batch == 5);
  CHECK(loaded.resume->sampler_consumed == 10);
  CHECK(loaded.resume->sampler_world_size == 2);
  CHECK(run_steps(resumed, *opt2, sched2, 4) == uninterrupted);
}

TEST_CASE("adam, adamw and sgd choose torch.optim's step kernel from foreach and fused", "[optim][kernels]") {
  // PyTorch 2.x: with neither flag given, foreach on CUDA and the for-loop on the CPU; an explicit
  // `fused: false` alone picks no default either; fused only when asked.
  const std::vector<at::Tensor> cpu{torch::zeros({3}), torch::zeros({2, 2})};
  CHECK(choose_step_kernel(KernelFlags{}, cpu) == StepKernel::for_loop);
  KernelFlags flags;
  flags.foreach = true;
  CHECK(choose_step_kernel(flags, cpu) == StepKernel::foreach);
  flags.foreach = false;
  CHECK(choose_step_kernel(flags, cpu) == StepKernel::for_loop);
  flags = KernelFlags{};
  flags.fused = true;
  CHECK(choose_step_kernel(flags, cpu) == StepKernel::fused);
  flags.foreach = false;
  CHECK(choose_step_kernel(flags, cpu) == StepKernel::fused);
  flags = KernelFlags{};
  flags.fused = false;
  CHECK(choose_step_kernel(flags, cpu) == StepKernel::for_loop);

  // The registry hands the flags to the optimizer; null is PyTorch's default.
  oml::cli::register_builtins();
  Toy toy;
  OptimizerContext ctx{toy.model->parameters(), {toy.loss_weight}};
  const auto adamw = oml::registries().optimizers.create(
      spec("c: {name: adamw, args: {foreach: true, maximize: true}}\n"), ctx);
  const auto* multi_adamw = dynamic_cast<const MultiTensorAdamW*>(adamw.get());
  REQUIRE(multi_adamw != nullptr);
  CHECK(multi_adamw->flags().foreach.value_or(false));
  CHECK_FALSE(multi_adamw->flags().fused.has_value());
  CHECK(multi_adamw->flags().maximize);
  const auto sgd = oml::registries().optimizers.create(spec("c: {name: sgd, args: {foreach: null}}\n"), ctx);
  const auto* multi_sgd = dynamic_cast<const MultiTensorSGD*>(sgd.get());
  REQUIRE(multi_sgd != nullptr);
  CHECK_FALSE(multi_sgd->flags().foreach.has_value());
  CHECK_FALSE(multi_sgd->flags().maximize);
  const auto adam = oml::registries().optimizers.create(spec("c: {name: adam}\n"), ctx);
  CHECK(dynamic_cast<const MultiTensorAdam*>(adam.get()) != nullptr);
}

TEST_CASE(
    "The default adam, adamw and sgd on the CPU are the for-loop, within 1e-6 of LibTorch's own classes",
    "[optim][kernels]") {
  // No flag on the CPU is the for-loop: the same steps as `foreach: false`, to the bit. SGD's is
  // LibTorch's SGD step, unchanged; Adam's and AdamW's are torch.optim's single-tensor step
  // (optim_parity_tests: equal to it), whose lerp_ rounds otherwise than LibTorch's mul_ + add_.
  oml::cli::register_builtins();
  struct Case {
    std::string args;
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)> make_libtorch;
    bool libtorch_equal;
  };
  const std::vector<std::pair<std::string, Case>> cases{
      {"adam",
       {"lr: 0.01, amsgrad: true",
        [](std::vector<at::Tensor> p) {
          return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(0.01).amsgrad(true));
        },
        false}},
      {"adamw",
       {"weight_decay: 0.01",
        [](std::vector<at::Tensor> p) {
          return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(1e-3));
        },
        false}},
      {"sgd",
       {"lr: 0.05, momentum: 0.9, nesterov: true",
        [](std::vector<at::Tensor> p) {
          return std::make_unique<torch::optim::SGD>(
              p, torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
        },
        true}},
  };
  for (const auto& [name, c] : cases) {
    INFO(name << ": " << c.args);
    TwinParameters params(3);
    std::vector<at::Tensor> loop_params;
    for (const auto& t : params.start) loop_params.push_back(t.clone().requires_grad_(true));
    const auto create = [&](const std::string& args, std::vector<at::Tensor> p) {
      return oml::registries().optimizers.create(spec("c: {name: " + name + ", args: {" + args + "}}\n"),
                                                 OptimizerContext{std::move(p), {}});
    };
    const auto by_default = create(c.args, params.ours);
    const auto loop = create(c.args + ", foreach: false", loop_params);
    const auto libtorch = c.make_libtorch(params.theirs);
    for (int step = 0; step < 20; ++step) {
      params.give_gradients();
      for (std::size_t i = 0; i < params.start.size(); ++i)
        loop_params[i].mutable_grad() = params.ours[i].grad().clone();
      by_default->step();
      loop->step();
      libtorch->step();
    }
    for (std::size_t i = 0; i < params.start.size(); ++i) {
      CHECK(torch::equal(params.ours[i], loop_params[i]));
      CHECK(oml::test::max_abs_diff(params.ours[i], params.theirs[i]) <= 1e-6);
      if (c.libtorch_equal) CHECK(torch::equal(params.ours[i], params.theirs[i]));
    }
    CHECK(oml::test::max_abs_diff(params.ours[0], params.start[0]) > 1e-3);  // they moved
  }
}

TEST_CASE(
    "In CUDA-graph mode adam, adamw and sgd step as their fused kernels, learning rate changes included",
    "[optim][kernels][cuda_graphs]") {
  oml::cli::register_builtins();
  Toy toy;
  OptimizerContext toy_ctx{toy.model->parameters(), {}};
  const auto problem = [&](const std::string& yaml) {
    const auto opt = oml::registries().optimizers.create(spec("c: " + yaml + "\n"), toy_ctx);
    auto* capturable = dynamic_cast<CapturableOptimizer*>(opt.get());
    REQUIRE(capturable != nullptr);
    return capturable->capture_problem();
  };
  if (!fused_kernels_available()) {
    // LibTorch 1.13: no fused kernels, so no step that reads its counts from the device.
    CHECK_THAT(problem("{name: adam}"), Contains("does not have (2.4 and later do)"));
    return;
  }
  CHECK(problem("{name: adam}").empty());
  CHECK(problem("{name: sgd, args: {foreach: null}}").empty());
  CHECK_THAT(problem("{name: adamw, args: {fused: false}}"), Contains("optimizer 'adamw' has fused: false"));
  CHECK_THAT(problem("{name: sgd, args: {foreach: true}}"), Contains("optimizer 'sgd' has foreach: true"));

  // Graph mode reads the learning rate from a float32 tensor; a scheduler's change (here at step
  // 6) reaches it before the next step. Compared with the fused kernel given the lr as a number.
  for (const std::string args :
       {"name: adam, args: {lr: 0.01, weight_decay: 0.1, amsgrad: true", "name: adamw, args: {lr: 0.02",
        "name: sgd, args: {lr: 0.05, momentum: 0.9, "
        "nesterov: true"}) {
    INFO(args);
    TwinParameters params(4);  // ours: graph mode, theirs: the fused kernel given numbers
    const auto graph_mode =
        oml::registries().optimizers.create(spec("c: {" + args + "}}\n"), OptimizerContext{params.ours, {}});
    const auto fused = oml::registries().optimizers.create(spec("c: {" + args + ", fused: true}}\n"),
                                                           OptimizerContext{params.theirs, {}});
    dynamic_cast<CapturableOptimizer&>(*graph_mode).enable_capture();
    for (int step = 0; step < 12; ++step) {
      if (step == 6) {
        for (auto* opt : {graph_mode.get(), fused.get()}) opt->param_groups()[0].options().set_lr(0.003);
      }
      params.give_gradients();
      graph_mode->step();
      fused->step();
    }
    // float32 learning rates against doubles: equal to float32 rounding.
    for (std::size_t i = 0; i < params.start.size(); ++i)
      CHECK(oml::test::max_abs_diff(params.ours[i], params.theirs[i]) <= 1e-6);
  }
}

TEST_CASE("A captured optimizer step counts on the host once per replay and refuses a first step",
          "[optim][kernels][cuda_graphs]") {
  if (!fused_kernels_available()) return;  // nothing can be captured (the case above checks why)
  oml::cli::register_builtins();
  torch::manual_seed(5);
  std::vector<at::Tensor> params{torch::randn({4, 3}).requires_grad_(true),
                                 torch::randn({2}).requires_grad_(true)};
  const auto opt = oml::registries().optimizers.create(spec("c: {name: adam, args: {lr: 0.01}}\n"),
                                                       OptimizerContext{params, {}});
  auto& capturable = dynamic_cast<CapturableOptimizer&>(*opt);
  capturable.enable_capture();
  const auto give_gradients = [&] {
    for (auto& p : params) p.mutable_grad() = torch::randn(p.sizes());
  };
  const auto host_step = [&](const at::Tensor& p) {
    return static_cast<torch::optim::AdamParamState&>(
               *opt->state().at(oml::torch_compat::optimizer_state_key(p)))
        .step();
  };
  // A first step inside a capture would be repeated by every replay: refused, and nothing counted.
  give_gradients();
  capturable.begin_capture();
  CHECK_THROWS_WITH(opt->step(),
                    Contains("optimizer 'adam': a parameter of shape [4, 3] takes its first step "
                             "in the captured step"));
  capturable.end_capture(false);
  CHECK(opt->state().empty());
  // Eager steps make the state; a captured step (on the CPU it runs, on a GPU it only records)
  // is taken back on the host, and each replay counts one.
  for (int i = 0; i < 3; ++i) {
    give_gradients();
    opt->step();
  }
  CHECK(host_step(params[0]) == 3);
  capturable.begin_capture();
  opt->step();
  capturable.end_capture(true);
  CHECK(host_step(params[0]) == 3);
  for (int replay = 0; replay < 4; ++replay) {
    capturable.before_replay();
    capturable.after_replay();
  }
  CHECK(host_step(params[0]) == 7);
  CHECK(host_step(params[1]) == 7);
  give_gradients();
  opt->step();  // an eager step after replays goes on counting from there
  CHECK(host_step(params[1]) == 8);
}

TEST_CASE("fused and foreach both true is a config error (exit 2) naming `fused`, reported with the others",
          "[optim][kernels]") {
  oml::cli::register_builtins();
  Toy toy;
  OptimizerContext ctx{toy.model->parameters(), {}};
  for (const std::string name : {"adam", "adamw", "sgd"}) {
    INFO(name);
    try {
      oml::registries().optimizers.create(
          spec("c: {name: " + name + ", args: {lr: 0.1, foreach: true, fused: true}}\n"), ctx);
      FAIL("no error");
    } catch (const oml::ConfigError& e) {
      CHECK(e.exit_code() == 2);
      CHECK_THAT(e.what(),
                 Contains("c.args.fused: optimizer '" + name + "': fused and foreach cannot both be true"));
    }
  }
  // Parsed with the rest of the config: every problem is reported at once.
  const auto document = oml::config::Document::from_string(
      "dataset_root: d\n"
      "optimizer: {name: sgd, args: {lr: 0.1, foreach: true, fused: true}}\n"
      "scheduling:\n"
      "  scheduler: {name: step, args: {step_size: 0}}\n",
      "train.yaml");
  try {
    oml::cli::check_components(oml::config::parse_run_config(document.root()));
    FAIL("no error");
  } catch (const oml::ConfigError& e) {
    CHECK(e.exit_code() == 2);
    const std::string text = oml::test::error_text(e);
    CHECK_THAT(text, Contains("train.yaml:2:") && Contains("optimizer.args.fused: optimizer 'sgd'"));
    CHECK_THAT(text, Contains("train.yaml:4:") && Contains("step_size must be >= 1"));
  }
  if (!fused_kernels_available()) {
    // LibTorch 1.13 has no fused kernels: `fused: true` alone is refused, naming it.
    CHECK_THROWS_WITH(
        oml::registries().optimizers.create(spec("c: {name: adam, args: {fused: true}}\n"), ctx),
        Contains("c.args.fused") && Contains("2.4 and later"));
  }
}

TEST_CASE("A channels_last parameter's optimizer state is laid out as it, also after a save and load",
          "[optim][resume][memory_format]") {
  // Fused kernels (CUDA's) take a parameter, its gradient and its moments only when all are laid
  // out alike: a resumed run must not bring its moments back in another layout.
  oml::cli::register_builtins();
  const auto make = [] {
    torch::manual_seed(2);
    return torch::randn({4, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  };
  // fused where this LibTorch has the kernels (not 1.13), foreach otherwise.
  const std::string adam = fused_kernels_available() ? "c: {name: adam, args: {lr: 0.01, fused: true}}\n"
                                                     : "c: {name: adam, args: {lr: 0.01, foreach: true}}\n";
  for (const std::string& yaml :
       {adam, std::string("c: {name: sgd, args: {lr: 0.01, momentum: 0.9, foreach: true}}\n")}) {
    INFO(yaml);
    std::vector<at::Tensor> params{make()};
    const auto opt = oml::registries().optimizers.create(spec(yaml), OptimizerContext{params, {}});
    params[0].mutable_grad() = torch::ones_like(params[0]);
    opt->step();
    std::vector<at::Tensor> resumed_params{make()};
    const auto resumed =
        oml::registries().optimizers.create(spec(yaml), OptimizerContext{resumed_params, {}});
    load_optimizer_state(*resumed, save_optimizer_state(*opt));
    for (const auto* o : {opt.get(), resumed.get()}) {
      const auto& state = *o->state().at(
          oml::torch_compat::optimizer_state_key(o == opt.get() ? params[0] : resumed_params[0]));
      at::Tensor moment;
      if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(&state))
        moment = adam->exp_avg();
      if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(&state))
        moment = sgd->momentum_buffer();
      REQUIRE(moment.defined());
      CHECK(moment.is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
}

}  // namespace optim_tests
