#pragma once
// Optimizers that LibTorch's C++ frontend lacks (in 1.13 and in 2.x): torch.optim's Adadelta,
// Adamax, ASGD, Rprop, NAdam and RAdam, each step following torch.optim's single-tensor update
// rule (what Python runs for CPU tensors) with its argument names and defaults.
//
// They share one class, FormulaOptimizer, with one UpdateRule each: hyper-parameters by
// torch.optim's names in a NamedOptions per group
// (tuples split: betas -> beta1, beta2; flags as 0/1), per-parameter state as a step count and
// named tensors (NamedState), created at a parameter's first step as torch.optim does. Both
// serialise through LibTorch's optimizer archive, so save_optimizer_state /
// load_optimizer_state (oml/optim/resume.h) checkpoint and resume them like the built-in ones.

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace oml::optim {

/// A parameter group's hyper-parameters, by torch.optim's names ("lr", "rho", "beta1", ...).
class NamedOptions : public torch::optim::OptimizerCloneableOptions<NamedOptions> {
 public:
  NamedOptions() = default;
  explicit NamedOptions(std::map<std::string, double> values) : values_(std::move(values)) {}
  /// Only the lr: LibTorch's archive loader makes options from a lr before reading them.
  explicit NamedOptions(double lr) { set("lr", lr); }

  /// InternalError when the optimizer has no such hyper-parameter.
  double get(const std::string& name) const;
  bool flag(const std::string& name) const { return get(name) != 0.0; }
  void set(const std::string& name, double value) { values_[name] = value; }
  const std::map<std::string, double>& values() const { return values_; }

  /// Fluent setter of the lr, as LibTorch's options (pipelines set a group's own lr with it).
  NamedOptions& lr(double value) {
    set("lr", value);
    return *this;
  }
  double get_lr() const override { return get("lr"); }
  void set_lr(const double lr) override { set("lr", lr); }
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;

 private:
  std::map<std::string, double> values_;
};

/// One parameter's state: the number of steps taken and named tensors ("exp_avg", "eta", ...).
class NamedState : public torch::optim::OptimizerCloneableParamState<NamedState> {
 public:
  int64_t step = 0;
  std::map<std::string, torch::Tensor> tensors;

  torch::Tensor& at(const std::string& name);
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

/// torch.optim's single-tensor update rule of one optimizer: the state tensors of a parameter
/// before its first step, and one update of it (under no-grad; state.step is already this
/// step's number).
struct UpdateRule {
  void (*init_state)(const torch::Tensor& param, const NamedOptions& group, NamedState& state);
  void (*update)(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                 NamedState& state);
};

/// The optimizers below: step() visits every parameter with a gradient, creates its state at
/// its first step, counts the step, then applies the rule.
class FormulaOptimizer : public torch::optim::Optimizer {
 public:
  FormulaOptimizer(std::vector<torch::optim::OptimizerParamGroup> groups, const NamedOptions& defaults,
                   const UpdateRule& rule);

  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  const UpdateRule& rule_;
};

/// The rules (torch/optim/<name>.py, _single_tensor_<name>), each with torch.optim's defaults;
/// a group's keys are torch.optim's argument names, tuples split into two keys.
/// Adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False)
extern const UpdateRule adadelta_rule;
/// Adamax(lr=2e-3, betas=(0.9, 0.999) -> beta1, beta2, eps=1e-8, weight_decay=0, maximize=False)
extern const UpdateRule adamax_rule;
/// ASGD(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False); eta and mu are
/// float32 scalars and `ax` the average, as torch's state.
extern const UpdateRule asgd_rule;
/// Rprop(lr=1e-2, etas=(0.5, 1.2) -> etaminus, etaplus, step_sizes=(1e-6, 50) -> step_size_min,
/// step_size_max, maximize=False); the step sizes start at the lr of the first step (later lr
/// changes do not reach them, as in torch).
extern const UpdateRule rprop_rule;
/// NAdam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
/// decoupled_weight_decay=False, maximize=False)
extern const UpdateRule nadam_rule;
/// RAdam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
/// maximize=False)
extern const UpdateRule radam_rule;

}  // namespace oml::optim
