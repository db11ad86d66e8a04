#include "oml/optim/grad_scaler.h"

#include <ATen/ATen.h>

#include "oml/common/error.h"

namespace oml::optim {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), start_scale_(options.init_scale) {
  OML_CHECK(options_.init_scale > 0 && options_.growth_factor > 1 && options_.backoff_factor > 0 &&
                options_.backoff_factor < 1 && options_.growth_interval > 0,
            ConfigError,
            "gradient scaler: expected init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 "
            "and growth_interval > 0");
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!scale_.defined() || scale_.device() != loss.device()) {
    const auto on = at::TensorOptions().device(loss.device());
    scale_ = at::full({1}, start_scale_, on.dtype(at::kFloat));
    growth_tracker_ = at::full({1}, start_growth_, on.dtype(at::kInt));
    found_inf_ = at::zeros({1}, on.dtype(at::kFloat));
    const at::Tensor skipped = at::zeros({1}, on.dtype(at::kFloat));
    if (skipped_.defined()) skipped.copy_(skipped_);  // the count goes where the scale goes
    skipped_ = skipped;
  }
  return loss * scale_.to(loss.scalar_type());
}

bool GradScaler::unscale(const std::vector<at::Tensor>& parameters) {
  unscale_in_place(parameters);
  return found_inf_.item<float>() == 0.0f;
}

void GradScaler::unscale_in_place(const std::vector<at::Tensor>& parameters) {
  OML_ASSERT(scale_.defined(), "GradScaler::unscale before scale()");
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  found_inf_.zero_();
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  if (scale_.is_cuda()) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  } else {
    for (at::Tensor& g : grads) {
      if (!at::isfinite(g).all().item<bool>()) found_inf_.fill_(1.0);
      g.mul_(inv_scale.to(g.scalar_type()));
    }
  }
  skipped_.add_(found_inf_);
}

int64_t GradScaler::skipped_steps() const {
  return skipped_.defined() ? static_cast<int64_t>(skipped_.item<float>()) : 0;
}

at::Tensor GradScaler::scale_tensor() const {
  return scale_.defined() ? scale_.clone()
                          : at::full({1}, start_scale_, at::TensorOptions().dtype(at::kFloat));
}

at::Tensor GradScaler::skipped_steps_tensor() const {
  return skipped_.defined() ? skipped_.clone() : at::zeros({1}, at::TensorOptions().dtype(at::kFloat));
}

void GradScaler::update() {
  OML_ASSERT(scale_.defined(), "GradScaler::update before scale()");
  if (scale_.is_cuda()) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor,
                           options_.backoff_factor, options_.growth_interval);
    return;
  }
  if (found_inf_.item<float>() != 0.0f) {
    scale_.mul_(options_.backoff_factor);
    growth_tracker_.zero_();
    return;
  }
  growth_tracker_.add_(1);
  if (growth_tracker_.item<int>() >= options_.growth_interval) {
    scale_.mul_(options_.growth_factor);
    growth_tracker_.zero_();
  }
}

double GradScaler::current_scale() const { return scale_.defined() ? scale_.item<double>() : start_scale_; }

c10::IValue GradScaler::state() const {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("scale", current_scale());
  out.insert("growth_factor", options_.growth_factor);
  out.insert("backoff_factor", options_.backoff_factor);
  out.insert("growth_interval", options_.growth_interval);
  out.insert("_growth_tracker",
             growth_tracker_.defined() ? static_cast<int64_t>(growth_tracker_.item<int>()) : start_growth_);
  return out;
}

void GradScaler::load_state(const c10::IValue& state) {
  OML_CHECK(state.isGenericDict(), DataError, "gradient scaler state: expected a dict, found a ",
            state.tagKind());
  const auto dict = state.toGenericDict();
  auto entry = [&](const char* key) {
    const auto found = dict.find(c10::IValue(std::string(key)));
    OML_CHECK(found != dict.end(), DataError, "gradient scaler state: missing entry '", key, "'");
    return found->value();
  };
  const c10::IValue scale = entry("scale");
  const c10::IValue tracker = entry("_growth_tracker");
  OML_CHECK(scale.isDouble() && scale.toDouble() > 0, DataError,
            "gradient scaler state: 'scale' must be a float > 0");
  OML_CHECK(tracker.isInt() && tracker.toInt() >= 0, DataError,
            "gradient scaler state: '_growth_tracker' must be an integer >= 0");
  start_scale_ = scale.toDouble();
  start_growth_ = tracker.toInt();
  if (scale_.defined()) {
    scale_.fill_(start_scale_);
    growth_tracker_.fill_(start_growth_);
  }
}

}  // namespace oml::optim
