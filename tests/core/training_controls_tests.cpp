// Lightning's training controls as the config reads them (top level and OML's
// lightning_trainer_extra_args), BatchLimit's arithmetic and the EarlyStopping callback.
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "support/config_errors.h"
#include "support/support.h"
#include "training/early_stopping.h"

namespace training_controls_tests {

using Catch::Matchers::Contains;
using oml::config::BatchLimit;
using oml::config::CheckpointMode;
using oml::config::EarlyStoppingOptions;
using oml::pipelines::EarlyStopping;

namespace {

oml::config::RunConfig parse(const std::string& yaml) {
  return oml::test::parse_run_config_text(yaml, "controls.yaml");
}

std::string parse_error(const std::string& yaml) {
  return oml::test::run_config_error(yaml, "controls.yaml");
}

// The index (1-based) of the update that stops, or 0.
int stops_at(EarlyStopping& stopping, const std::vector<double>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (stopping.update(values[i])) return static_cast<int>(i + 1);
  }
  return 0;
}

}  // namespace

TEST_CASE("Training controls have Lightning's defaults and are read at the top level or in the extra args",
          "[config][controls]") {
  const auto defaults = parse("max_epochs: 1\n");
  CHECK(defaults.controls.accumulate_grad_batches == 1);
  CHECK_FALSE(defaults.controls.gradient_clip_val);
  CHECK_FALSE(defaults.controls.limit_train_batches.limits());
  CHECK_FALSE(defaults.controls.early_stopping);
  CHECK(defaults.valid_period == 1);

  const auto top = parse(
      "accumulate_grad_batches: 4\ngradient_clip_val: 0.5\ngradient_clip_algorithm: value\n"
      "limit_train_batches: 1_0\nlimit_val_batches: 0.25\ncheck_val_every_n_epoch: 3\n"
      "early_stopping: {monitor: OVERALL/cmc/1, mode: max}\n");
  CHECK(top.controls.accumulate_grad_batches == 4);
  CHECK(*top.controls.gradient_clip_val == 0.5);
  CHECK(top.controls.gradient_clip_algorithm == oml::config::GradientClipAlgorithm::value);
  CHECK_FALSE(top.controls.limit_train_batches.is_fraction);
  CHECK(top.controls.limit_train_batches.value == 10);  // 1_0: an integer as YAML 1.1 writes one
  CHECK(top.controls.limit_val_batches.is_fraction);
  CHECK(top.valid_period == 3);
  REQUIRE(top.controls.early_stopping);
  CHECK(top.controls.early_stopping->monitor == "OVERALL/cmc/1");
  CHECK(top.controls.early_stopping->mode == CheckpointMode::max);
  CHECK(top.controls.early_stopping->patience == 3);  // Lightning's default

  const auto extra = parse(
      "lightning_trainer_extra_args: {accumulate_grad_batches: 2, gradient_clip_val: 0, limit_train_batches: "
      "1.0, "
      "check_val_every_n_epoch: 2}\n");
  CHECK(extra.controls.accumulate_grad_batches == 2);
  CHECK_FALSE(extra.controls.gradient_clip_val);  // 0: no clipping, as Lightning
  CHECK_FALSE(extra.controls.limit_train_batches.limits());
  CHECK(extra.valid_period == 2);

  // max_time as OML's test configs give it, Lightning's "DD:HH:MM:SS", or timedelta's arguments.
  CHECK_FALSE(defaults.controls.max_time_s);
  CHECK(*parse("lightning_trainer_extra_args: {max_time: \"00:12:00:00\"}\n").controls.max_time_s == 43200);
  CHECK(*parse("max_time: \"01:02:03:04\"\n").controls.max_time_s == 86400 + 7200 + 180 + 4);
  CHECK(*parse("max_time: {hours: 1, minutes: 30}\n").controls.max_time_s == 5400);
  CHECK(*parse("max_time: {seconds: 0.5}\n").controls.max_time_s == 0.5);
}

TEST_CASE("Bad training controls are config errors naming their key", "[config][controls]") {
  CHECK_THAT(parse_error("accumulate_grad_batches: 0\n"), Contains("accumulate_grad_batches"));
  CHECK_THAT(parse_error("limit_train_batches: 0\n"), Contains("limit_train_batches") && Contains("nothing"));
  CHECK_THAT(parse_error("limit_val_batches: -2\n"), Contains("limit_val_batches"));
  CHECK_THAT(parse_error("gradient_clip_algorithm: l2\n"), Contains("norm, value"));
  CHECK_THAT(parse_error("early_stopping: {monitor: x, mode: up}\n"), Contains("early_stopping.mode"));
  CHECK_THAT(parse_error("early_stopping: {monitor: x, min_delta: -1}\n"), Contains("min_delta"));
  CHECK_THAT(parse_error("valid_period: 2\ncheck_val_every_n_epoch: 2\n"),
             Contains("another name of 'valid_period'"));
  CHECK_THAT(parse_error("lightning_trainer_extra_args: {detect_anomaly: true}\n"),
             Contains("'detect_anomaly' is not a Lightning Trainer argument") &&
                 Contains("limit_val_batches") && Contains("max_time"));
  CHECK_THAT(
      parse_error("lightning_trainer_extra_args: {max_time: 3}\n"),
      Contains("lightning_trainer_extra_args.max_time") && Contains("DD:HH:MM:SS") && Contains("got '3'"));
  CHECK_THAT(parse_error("max_time: '00:01:00'\n"), Contains("got '00:01:00'"));
  CHECK_THAT(parse_error("max_time: '00:-1:00:00'\n"), Contains("DD:HH:MM:SS"));
  CHECK_THAT(parse_error("max_time: '00:00:00:00'\n"), Contains("expected a positive duration"));
  CHECK_THAT(parse_error("max_time: {hour: 1}\n"), Contains("max_time.hour") && Contains("got 'hour'"));
  CHECK_THAT(parse_error("lightning_trainer_extra_args: {limit_train_batch: 3}\n"),
             Contains("did you mean 'limit_train_batches'"));
  CHECK_THAT(parse_error("limit_val_batches: 1\nlightning_trainer_extra_args: {limit_val_batches: 2}\n"),
             Contains("'limit_val_batches' is also given at controls.yaml:1"));
  // Several problems are reported together.
  const std::string all =
      parse_error("accumulate_grad_batches: -1\nlightning_trainer_extra_args: {devices: 2}\n");
  CHECK_THAT(all, Contains("accumulate_grad_batches") && Contains("'devices'"));
}

TEST_CASE(
    "deterministic is read as Lightning's Trainer argument: true, false or warn, top level or extra args",
    "[config][controls]") {
  using oml::config::Determinism;
  CHECK(parse("max_epochs: 1\n").controls.deterministic == Determinism::off);
  CHECK(parse("deterministic: true\n").controls.deterministic == Determinism::on);
  CHECK(parse("deterministic: False\n").controls.deterministic == Determinism::off);
  CHECK(parse("deterministic: warn\n").controls.deterministic == Determinism::warn);
  CHECK(parse("deterministic: null\n").controls.deterministic == Determinism::off);  // Lightning's None
  // OML's configs pass Trainer arguments in lightning_trainer_extra_args.
  CHECK(parse("lightning_trainer_extra_args: {deterministic: true}\n").controls.deterministic ==
        Determinism::on);
  CHECK(parse("lightning_trainer_extra_args: {deterministic: warn}\n").controls.deterministic ==
        Determinism::warn);
  CHECK_THAT(parse_error("deterministic: 1\n"),
             Contains("deterministic") && Contains("expected true, false or warn") && Contains("got '1'"));
  CHECK_THAT(parse_error("lightning_trainer_extra_args: {deterministic: [true]}\n"),
             Contains("lightning_trainer_extra_args.deterministic") && Contains("got a collection"));
  CHECK_THAT(parse_error("deterministic: true\nlightning_trainer_extra_args: {deterministic: true}\n"),
             Contains("'deterministic' is also given at controls.yaml:1"));
}

TEST_CASE("benchmark (Lightning's) and float32_matmul_precision (torch's) are read, and bad values named",
          "[config][controls]") {
  CHECK_FALSE(parse("max_epochs: 1\n").controls.benchmark.has_value());  // PyTorch's setting stays
  CHECK(parse("benchmark: true\n").controls.benchmark == std::optional<bool>(true));
  CHECK(parse("lightning_trainer_extra_args: {benchmark: false}\n").controls.benchmark ==
        std::optional<bool>(false));
  CHECK_THAT(parse_error("benchmark: fast\n"), Contains("benchmark") && Contains("expected true or false"));
  using oml::config::Float32MatmulPrecision;
  CHECK(parse("max_epochs: 1\n").float32_matmul_precision == Float32MatmulPrecision::highest);
  CHECK(parse("float32_matmul_precision: medium\n").float32_matmul_precision ==
        Float32MatmulPrecision::medium);
  CHECK_THAT(parse_error("float32_matmul_precision: tf32\n"),
             Contains("float32_matmul_precision") && Contains("expected one of highest, high, medium") &&
                 Contains("'tf32'"));
  CHECK(parse("memory_format: channels_last\n").memory_format == oml::config::MemoryFormat::channels_last);
  CHECK_THAT(parse_error("memory_format: nhwc\n"),
             Contains("memory_format") && Contains("expected one of contiguous, channels_last"));
}

TEST_CASE("BatchLimit takes min(batches, N) of an int and int(batches x f) of a float, as Lightning",
          "[config][controls]") {
  CHECK(BatchLimit{false, 5}.apply(37, "limit_train_batches") == 5);
  CHECK(BatchLimit{false, 50}.apply(37, "limit_train_batches") == 37);
  CHECK(BatchLimit{true, 0.25}.apply(37, "limit_train_batches") == 9);
  CHECK(BatchLimit{true, 1.0}.apply(37, "limit_train_batches") == 37);
  CHECK(BatchLimit{true, 0.0}.apply(37, "limit_val_batches") == 0);
  CHECK_THROWS_WITH(BatchLimit({true, 0.01}).apply(37, "limit_train_batches"),
                    Contains("limit_train_batches") && Contains("less than one batch"));
}

TEST_CASE("EarlyStopping counts validations without an improvement beyond min_delta, as Lightning's",
          "[controls][early_stopping]") {
  EarlyStoppingOptions max{"OVERALL/cmc/1", 2, CheckpointMode::max, 0.05};
  EarlyStopping on_max(max);
  // 0.5 improves (from -inf); 0.54 is within min_delta; 0.6 improves; 0.62, 0.6 do not: stop.
  CHECK(stops_at(on_max, {0.5, 0.54, 0.6, 0.62, 0.6, 0.9}) == 5);
  CHECK_THAT(on_max.reason(),
             Contains("Monitored metric OVERALL/cmc/1 did not improve in the last 2 records. "
                      "Best score: 0.600. Signaling Trainer to stop."));

  EarlyStopping on_min({"loss", 1, CheckpointMode::min, 0.0});
  CHECK(stops_at(on_min, {3, 2, 1, 1}) == 4);  // equal is no improvement

  EarlyStopping patience_zero({"loss", 0, CheckpointMode::min, 0.0});
  CHECK(stops_at(patience_zero, {3, 4}) == 2);

  EarlyStopping not_finite({"loss", 5, CheckpointMode::min, 0.0});
  CHECK(stops_at(not_finite, {3, std::numeric_limits<double>::quiet_NaN()}) == 2);
  CHECK_THAT(not_finite.reason(), Contains("is not finite. Previous best value was 3.000"));
}

TEST_CASE("EarlyStopping's state survives a round trip, and a damaged one is a DataError",
          "[controls][early_stopping]") {
  EarlyStoppingOptions options{"m", 3, CheckpointMode::max, 0.0};
  EarlyStopping first(options);
  CHECK(stops_at(first, {0.5, 0.4, 0.3}) == 0);  // two without improvement
  EarlyStopping resumed(options);
  resumed.load_state(first.state());
  CHECK(resumed.update(0.45));  // the third: stops, as `first` would
  CHECK(first.update(0.45));

  c10::impl::GenericDict damaged(c10::StringType::get(), c10::AnyType::get());
  damaged.insert("best_score", 0.5);
  CHECK_THROWS_AS(resumed.load_state(damaged), oml::DataError);
  CHECK_THROWS_AS(resumed.load_state(c10::IValue(3)), oml::DataError);
}

}  // namespace training_controls_tests
