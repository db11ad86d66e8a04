#include "training/early_stopping.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "oml/common/error.h"

namespace oml::pipelines {

namespace {

// Lightning formats scores with {:.3f}.
std::string three_decimals(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.3f", value);
  return text;
}

}  // namespace

EarlyStopping::EarlyStopping(config::EarlyStoppingOptions options)
    : options_(std::move(options)),
      best_(options_.mode == config::CheckpointMode::min ? std::numeric_limits<double>::infinity()
                                                         : -std::numeric_limits<double>::infinity()) {}

bool EarlyStopping::update(double value) {
  const bool max = options_.mode == config::CheckpointMode::max;
  if (!std::isfinite(value)) {
    reason_ = "Monitored metric " + options_.monitor + " = " + std::to_string(value) +
              " is not finite. Previous best value was " + three_decimals(best_) +
              ". Signaling Trainer to stop.";
    return true;
  }
  const bool improved = max ? value - options_.min_delta > best_ : value + options_.min_delta < best_;
  if (improved) {
    best_ = value;
    wait_ = 0;
    return false;
  }
  ++wait_;
  if (wait_ < options_.patience) return false;
  reason_ = "Monitored metric " + options_.monitor + " did not improve in the last " + std::to_string(wait_) +
            " records. Best score: " + three_decimals(best_) + ". Signaling Trainer to stop.";
  return true;
}

c10::IValue EarlyStopping::state() const {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("best_score", best_);
  out.insert("wait_count", wait_);
  return out;
}

void EarlyStopping::load_state(const c10::IValue& state) {
  OML_CHECK(state.isGenericDict(), DataError, "early stopping state: expected a dict, found a ",
            state.tagKind());
  const auto dict = state.toGenericDict();
  const auto entry = [&](const char* key) {
    const auto found = dict.find(c10::IValue(std::string(key)));
    OML_CHECK(found != dict.end(), DataError, "early stopping state: missing entry '", key, "'");
    return found->value();
  };
  const c10::IValue best = entry("best_score"), wait = entry("wait_count");
  OML_CHECK(best.isDouble(), DataError, "early stopping state: entry 'best_score' must be a float, found a ",
            best.tagKind());
  OML_CHECK(wait.isInt() && wait.toInt() >= 0, DataError,
            "early stopping state: entry 'wait_count' must be an integer >= 0");
  best_ = best.toDouble();
  wait_ = wait.toInt();
}

}  // namespace oml::pipelines
