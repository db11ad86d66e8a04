#include "oml/optim/scheduler.h"

#include <torch/torch.h>

#include <cmath>

#include "oml/common/error.h"
#include "oml/optim/formula_optimizers.h"

namespace oml::optim {

Scheduler::Scheduler(torch::optim::Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& group : optimizer_.param_groups()) base_lrs_.push_back(group.options().get_lr());
}

void Scheduler::step(std::optional<double> metric) {
  OML_CHECK(!requires_metric() || metric.has_value(), UsageError, "scheduler '", kind(),
            "' needs the monitored metric's value at every step (scheduling.monitor_metric)");
  advance(metric);
}

void Scheduler::advance(std::optional<double>) {
  ++step_;
  apply();
}

void Scheduler::apply() {
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) {
    set_lr(g, lr_at(step_, g, base_lrs_[g]));
    if (const auto momentum = momentum_at(step_, g)) set_momentum(g, *momentum);
  }
}

bool Scheduler::has_momentum(const torch::optim::Optimizer& optimizer) {
  const torch::optim::OptimizerOptions& o = optimizer.defaults();
  if (const auto* named = dynamic_cast<const NamedOptions*>(&o)) return named->values().count("beta1") > 0;
  return dynamic_cast<const torch::optim::SGDOptions*>(&o) ||
         dynamic_cast<const torch::optim::RMSpropOptions*>(&o) ||
         dynamic_cast<const torch::optim::AdamOptions*>(&o) ||
         dynamic_cast<const torch::optim::AdamWOptions*>(&o);
}

void Scheduler::set_momentum(std::size_t group, double momentum) {
  torch::optim::OptimizerOptions& o = optimizer_.param_groups()[group].options();
  if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&o)) {
    sgd->momentum(momentum);
  } else if (auto* rmsprop = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) {
    rmsprop->momentum(momentum);
  } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&o)) {
    adam->betas({momentum, std::get<1>(adam->betas())});
  } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&o)) {
    adamw->betas({momentum, std::get<1>(adamw->betas())});
  } else if (auto* named = dynamic_cast<NamedOptions*>(&o)) {
    OML_ASSERT(named->values().count("beta1"), "set_momentum on an optimizer without one");
    named->set("beta1", momentum);
  } else {
    OML_ASSERT(false, "set_momentum on an optimizer without one");
  }
}

void Scheduler::set_lr(std::size_t group, double lr) {
  optimizer_.param_groups()[group].options().set_lr(lr);
}

std::vector<double> Scheduler::lrs() const {
  std::vector<double> out;
  for (const auto& group : optimizer_.param_groups()) out.push_back(group.options().get_lr());
  return out;
}

c10::IValue Scheduler::state() const {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("kind", std::string(kind()));
  out.insert("step", step_);
  out.insert("base_lrs", c10::List<double>(base_lrs_));
  out.insert("lrs", c10::List<double>(lrs()));
  save_extra(out);
  return out;
}

c10::IValue Scheduler::state_entry(const c10::impl::GenericDict& state, const std::string& key) {
  const auto found = state.find(c10::IValue(key));
  OML_CHECK(found != state.end(), DataError, "scheduler state: missing entry '", key, "'");
  return found->value();
}

int64_t Scheduler::state_integer(const c10::impl::GenericDict& state, const std::string& key) {
  const c10::IValue value = state_entry(state, key);
  OML_CHECK(value.isInt(), DataError, "scheduler state: entry '", key, "' must be an integer, found a ",
            value.tagKind());
  return value.toInt();
}

double Scheduler::state_number(const c10::IValue& value, const std::string& key, bool finite) {
  OML_CHECK(value.isDouble() || value.isInt(), DataError, "scheduler state: entry '", key,
            "' must hold numbers, found a ", value.tagKind());
  const double number = value.isDouble() ? value.toDouble() : static_cast<double>(value.toInt());
  OML_CHECK(!finite || std::isfinite(number), DataError, "scheduler state: entry '", key, "' holds ", number,
            ", expected a finite number");
  return number;
}

void Scheduler::load_state(const c10::IValue& state) {
  OML_CHECK(state.isGenericDict(), DataError, "scheduler state: expected a dict, found a ", state.tagKind());
  const auto dict = state.toGenericDict();
  const auto saved_kind = state_entry(dict, "kind");
  OML_CHECK(saved_kind.isString() && saved_kind.toStringRef() == kind(), DataError,
            "scheduler state was saved by '", saved_kind.isString() ? saved_kind.toStringRef() : "?",
            "', cannot restore it into '", kind(), "'");
  const auto to_doubles = [&](const std::string& key) {
    const c10::IValue list = state_entry(dict, key);
    OML_CHECK(list.isList(), DataError, "scheduler state: entry '", key, "' must be a list, found a ",
              list.tagKind());
    std::vector<double> out;
    for (const auto& v : list.toListRef()) out.push_back(state_number(v, key));
    return out;
  };
  auto base = to_doubles("base_lrs");
  auto current = to_doubles("lrs");
  OML_CHECK(base.size() == base_lrs_.size() && current.size() == base_lrs_.size(), DataError,
            "scheduler state has ", base.size(), " parameter groups, the optimizer has ", base_lrs_.size());
  const int64_t step = state_integer(dict, "step");
  base_lrs_ = std::move(base);
  step_ = step;
  for (std::size_t g = 0; g < current.size(); ++g) {
    set_lr(g, current[g]);
    if (const auto momentum = momentum_at(step_, g)) set_momentum(g, *momentum);
  }
  load_extra(dict);
}

}  // namespace oml::optim
