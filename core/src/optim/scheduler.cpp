#include "oml/optim/scheduler.h"

#include <torch/torch.h>

#include "oml/common/error.h"

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
  for (std::size_t g = 0; g < base_lrs_.size(); ++g) set_lr(g, lr_at(step_, g, base_lrs_[g]));
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

void Scheduler::load_state(const c10::IValue& state) {
  OML_CHECK(state.isGenericDict(), DataError, "scheduler state: expected a dict, found a ", state.tagKind());
  const auto dict = state.toGenericDict();
  const auto get = [&](const std::string& key) {
    const auto found = dict.find(c10::IValue(key));
    OML_CHECK(found != dict.end(), DataError, "scheduler state: missing entry '", key, "'");
    return found->value();
  };
  const auto saved_kind = get("kind");
  OML_CHECK(saved_kind.isString() && saved_kind.toStringRef() == kind(), DataError,
            "scheduler state was saved by '", saved_kind.isString() ? saved_kind.toStringRef() : "?",
            "', cannot restore it into '", kind(), "'");
  const auto to_doubles = [&](const std::string& key) {
    std::vector<double> out;
    for (const auto& v : get(key).toListRef()) out.push_back(v.toDouble());
    return out;
  };
  auto base = to_doubles("base_lrs");
  auto current = to_doubles("lrs");
  OML_CHECK(base.size() == base_lrs_.size() && current.size() == base_lrs_.size(), DataError,
            "scheduler state has ", base.size(), " parameter groups, the optimizer has ", base_lrs_.size());
  base_lrs_ = std::move(base);
  step_ = get("step").toInt();
  for (std::size_t g = 0; g < current.size(); ++g) set_lr(g, current[g]);
  load_extra(dict);
}

}  // namespace oml::optim
