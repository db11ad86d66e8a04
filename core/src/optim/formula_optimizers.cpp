#include "oml/optim/formula_optimizers.h"

#include <torch/optim/serialize.h>
#include <torch/serialize/archive.h>
#include <torch/torch.h>

#include <cmath>

#include "oml/common/error.h"
#include "torch_compat.h"

namespace oml::optim {

namespace {

// Names and values go as two parallel lists: a default-constructed object (what LibTorch's
// loader creates) learns its keys from the archive.
c10::List<std::string> name_list(const std::vector<std::string>& names) {
  c10::List<std::string> out;
  for (const auto& name : names) out.push_back(name);
  return out;
}

std::vector<std::string> read_names(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  OML_CHECK(value.isList(), DataError, "optimizer state: entry '", key, "' must be a list");
  std::vector<std::string> names;
  for (const auto& item : value.toListRef()) {
    OML_CHECK(item.isString(), DataError, "optimizer state: entry '", key, "' must list names");
    names.push_back(item.toStringRef());
  }
  return names;
}

// torch.optim's `grad if not maximize else -grad`, then L2 weight decay in the gradient.
torch::Tensor effective_gradient(const torch::Tensor& param, const torch::Tensor& grad,
                                 const NamedOptions& group, bool decay_in_gradient = true) {
  torch::Tensor g = group.flag("maximize") ? -grad : grad;
  const double weight_decay = group.get("weight_decay");
  if (decay_in_gradient && weight_decay != 0) g = g.add(param, weight_decay);
  return g;
}

// NAdam's and RAdam's weight decay: decoupled (AdamW's, on the parameter) or in the gradient.
torch::Tensor decayed_gradient(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group) {
  const bool decoupled = group.flag("decoupled_weight_decay");
  const double weight_decay = group.get("weight_decay");
  if (decoupled && weight_decay != 0) param.mul_(1 - group.get("lr") * weight_decay);
  return effective_gradient(param, grad, group, /*decay_in_gradient=*/!decoupled);
}

// State tensors that start at zero, shaped as the parameter.
void add_zeros(const torch::Tensor& param, NamedState& state, std::initializer_list<const char*> names) {
  for (const char* name : names)
    state.tensors[name] = torch::zeros_like(param, torch::MemoryFormat::Preserve);
}

// torch.optim keeps some scalars of the state as 0-dim tensors of the default dtype (float32):
// their rounding is part of the update rule.
torch::Tensor scalar_tensor(double value, const torch::Tensor& param) {
  return torch::full({}, value, torch::TensorOptions().dtype(torch::kFloat).device(param.device()));
}

}  // namespace

double NamedOptions::get(const std::string& name) const {
  const auto found = values_.find(name);
  OML_CHECK(found != values_.end(), InternalError, "optimizer has no hyper-parameter '", name, "'");
  return found->second;
}

void NamedOptions::serialize(torch::serialize::OutputArchive& archive) const {
  std::vector<std::string> names;
  c10::List<double> values;
  for (const auto& [name, value] : values_) {
    names.push_back(name);
    values.push_back(value);
  }
  archive.write("names", name_list(names));
  archive.write("values", values);
}

void NamedOptions::serialize(torch::serialize::InputArchive& archive) {
  const std::vector<std::string> names = read_names(archive, "names");
  c10::IValue values;
  archive.read("values", values);
  OML_CHECK(values.isDoubleList() && values.toDoubleList().size() == names.size(), DataError,
            "optimizer state: 'values' must hold one number per name");
  values_.clear();
  const auto list = values.toDoubleList();
  for (std::size_t i = 0; i < names.size(); ++i) values_[names[i]] = list.get(i);
}

torch::Tensor& NamedState::at(const std::string& name) {
  const auto found = tensors.find(name);
  OML_CHECK(found != tensors.end(), InternalError, "optimizer state has no tensor '", name, "'");
  return found->second;
}

void NamedState::serialize(torch::serialize::OutputArchive& archive) const {
  archive.write("step", c10::IValue(step));
  std::vector<std::string> names;
  for (const auto& kv : tensors) names.push_back(kv.first);
  archive.write("names", name_list(names));
  for (const auto& [name, tensor] : tensors) archive.write("tensor." + name, c10::IValue(tensor));
}

void NamedState::serialize(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("step", value);
  OML_CHECK(value.isInt(), DataError, "optimizer state: 'step' must be an integer");
  step = value.toInt();
  tensors.clear();
  for (const std::string& name : read_names(archive, "names")) {
    c10::IValue tensor;
    archive.read("tensor." + name, tensor);
    OML_CHECK(tensor.isTensor(), DataError, "optimizer state: '", name, "' must be a tensor");
    tensors[name] = tensor.toTensor();
  }
}

FormulaOptimizer::FormulaOptimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                   const NamedOptions& defaults, const UpdateRule& rule)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<NamedOptions>(defaults)), rule_(rule) {}

torch::Tensor FormulaOptimizer::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const NamedOptions&>(group.options());
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;  // torch.optim skips parameters without a gradient
      OML_CHECK(!param.grad().is_sparse(), UsageError, "this optimizer does not support sparse gradients");
      auto& slot = state_[torch_compat::optimizer_state_key(param)];
      if (!slot) {
        auto fresh = std::make_unique<NamedState>();
        rule_.init_state(param, options, *fresh);
        slot = std::move(fresh);
      }
      auto& state = static_cast<NamedState&>(*slot);
      ++state.step;
      rule_.update(param, param.grad(), options, state);
    }
  }
  return loss;
}

void FormulaOptimizer::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<NamedState, NamedOptions>(archive, *this);
}

void FormulaOptimizer::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<NamedState, NamedOptions>(archive, *this);
}

// ---- the update rules (torch/optim/<name>.py, _single_tensor_<name>) -------------------------

namespace {

void adadelta_init(const torch::Tensor& param, const NamedOptions&, NamedState& state) {
  add_zeros(param, state, {"square_avg", "acc_delta"});
}

void adadelta_update(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                     NamedState& state) {
  const double rho = group.get("rho"), eps = group.get("eps");
  const torch::Tensor g = effective_gradient(param, grad, group);
  torch::Tensor& square_avg = state.at("square_avg");
  torch::Tensor& acc_delta = state.at("acc_delta");
  square_avg.mul_(rho).addcmul_(g, g, 1 - rho);
  const torch::Tensor std = square_avg.add(eps).sqrt_();
  torch::Tensor delta = acc_delta.add(eps).sqrt_();
  delta.div_(std).mul_(g);
  acc_delta.mul_(rho).addcmul_(delta, delta, 1 - rho);
  param.add_(delta, -group.get("lr"));
}

void adamax_init(const torch::Tensor& param, const NamedOptions&, NamedState& state) {
  add_zeros(param, state, {"exp_avg", "exp_inf"});
}

void adamax_update(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                   NamedState& state) {
  const double beta1 = group.get("beta1"), beta2 = group.get("beta2"), eps = group.get("eps");
  const torch::Tensor g = effective_gradient(param, grad, group);
  torch::Tensor& exp_avg = state.at("exp_avg");
  torch::Tensor& exp_inf = state.at("exp_inf");
  exp_avg.lerp_(g, 1 - beta1);
  torch::maximum_out(exp_inf, exp_inf.mul_(beta2), g.abs().add_(eps));
  const double bias_correction = 1 - std::pow(beta1, static_cast<double>(state.step));
  param.addcdiv_(exp_avg, exp_inf, -group.get("lr") / bias_correction);
}

void asgd_init(const torch::Tensor& param, const NamedOptions& group, NamedState& state) {
  state.tensors["eta"] = scalar_tensor(group.get("lr"), param);
  state.tensors["mu"] = scalar_tensor(1.0, param);
  add_zeros(param, state, {"ax"});
}

void asgd_update(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                 NamedState& state) {
  const double lr = group.get("lr"), lambd = group.get("lambd"), alpha = group.get("alpha");
  const torch::Tensor g = effective_gradient(param, grad, group);
  torch::Tensor& eta = state.at("eta");
  torch::Tensor& mu = state.at("mu");
  torch::Tensor& ax = state.at("ax");
  const double eta_value = eta.item<double>();
  param.mul_(1 - lambd * eta_value);  // decay term
  param.add_(g, -eta_value);
  if (mu.item<double>() != 1) {
    ax.add_(param.sub(ax).mul_(mu));
  } else {
    ax.copy_(param);
  }
  const auto step = static_cast<double>(state.step);
  eta.fill_(lr / std::pow(1 + lambd * lr * step, alpha));
  mu.fill_(1 / std::max(1.0, step - group.get("t0")));
}

void rprop_init(const torch::Tensor& param, const NamedOptions& group, NamedState& state) {
  add_zeros(param, state, {"prev"});
  state.tensors["step_size"] = torch::full_like(param, group.get("lr"));
}

void rprop_update(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                  NamedState& state) {
  const double etaminus = group.get("etaminus"), etaplus = group.get("etaplus");
  torch::Tensor g = group.flag("maximize") ? -grad : grad;
  torch::Tensor& prev = state.at("prev");
  torch::Tensor& step_size = state.at("step_size");
  torch::Tensor sign = g.mul(prev).sign();
  sign.masked_fill_(sign.gt(0), etaplus);
  sign.masked_fill_(sign.lt(0), etaminus);
  sign.masked_fill_(sign.eq(0), 1);
  step_size.mul_(sign).clamp_(group.get("step_size_min"), group.get("step_size_max"));
  // Where the sign flipped the gradient counts as 0: no step now, and no flip next time.
  g = g.clone(torch::MemoryFormat::Preserve);
  g.masked_fill_(sign.eq(etaminus), 0);
  param.addcmul_(g.sign(), step_size, -1);
  prev.copy_(g);
}

void nadam_init(const torch::Tensor& param, const NamedOptions&, NamedState& state) {
  state.tensors["mu_product"] = scalar_tensor(1.0, param);
  add_zeros(param, state, {"exp_avg", "exp_avg_sq"});
}

void nadam_update(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                  NamedState& state) {
  const double lr = group.get("lr"), beta1 = group.get("beta1"), beta2 = group.get("beta2");
  const double eps = group.get("eps"), momentum_decay = group.get("momentum_decay");
  const auto step = static_cast<double>(state.step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  const torch::Tensor g = decayed_gradient(param, grad, group);
  // The momentum schedule: mu_t and mu_{t+1}, and their running product.
  const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, step * momentum_decay));
  const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * momentum_decay));
  torch::Tensor& mu_product = state.at("mu_product");
  mu_product.mul_(mu);
  torch::Tensor& exp_avg = state.at("exp_avg");
  torch::Tensor& exp_avg_sq = state.at("exp_avg_sq");
  exp_avg.lerp_(g, 1 - beta1);
  exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2);
  torch::Tensor denom = exp_avg_sq.div(bias_correction2).sqrt();
  const double product = mu_product.item<double>();
  const double product_next = product * mu_next;
  denom.add_(eps);
  param.addcdiv_(g, denom, -lr * (1.0 - mu) / (1.0 - product));
  param.addcdiv_(exp_avg, denom, (-lr * mu_next) / (1.0 - product_next));
}

void radam_init(const torch::Tensor& param, const NamedOptions&, NamedState& state) {
  add_zeros(param, state, {"exp_avg", "exp_avg_sq"});
}

void radam_update(torch::Tensor& param, const torch::Tensor& grad, const NamedOptions& group,
                  NamedState& state) {
  const double lr = group.get("lr"), beta1 = group.get("beta1"), beta2 = group.get("beta2");
  const double eps = group.get("eps");
  const auto step = static_cast<double>(state.step);
  const torch::Tensor g = decayed_gradient(param, grad, group);
  torch::Tensor& exp_avg = state.at("exp_avg");
  torch::Tensor& exp_avg_sq = state.at("exp_avg_sq");
  exp_avg.lerp_(g, 1 - beta1);
  exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2);
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  const torch::Tensor bias_corrected_exp_avg = exp_avg / bias_correction1;
  // The variance is rectified once its estimate is tractable (rho_t > 5); before that the step
  // is SGD with momentum.
  const double rho_inf = 2 / (1 - beta2) - 1;
  const double rho_t = rho_inf - 2 * step * std::pow(beta2, step) / bias_correction2;
  if (rho_t > 5.0) {
    const double rect =
        std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
    // Python's `scalar / tensor` is tensor.reciprocal() * scalar.
    const torch::Tensor adaptive_lr = exp_avg_sq.sqrt().add_(eps).reciprocal() * std::sqrt(bias_correction2);
    param.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, -1.0);
  } else {
    param.add_(bias_corrected_exp_avg * lr, -1.0);
  }
}

}  // namespace

const UpdateRule adadelta_rule{adadelta_init, adadelta_update};
const UpdateRule adamax_rule{adamax_init, adamax_update};
const UpdateRule asgd_rule{asgd_init, asgd_update};
const UpdateRule rprop_rule{rprop_init, rprop_update};
const UpdateRule nadam_rule{nadam_init, nadam_update};
const UpdateRule radam_rule{radam_init, radam_update};

}  // namespace oml::optim
