// Lightning's training controls in real oml-train runs on the Fashion-MNIST subset:
// accumulate_grad_batches, gradient clipping, limit_train_batches / limit_val_batches,
// check_val_every_n_epoch, early stopping, and OML's lightning_trainer_extra_args; and
// ddp.gather_embeddings_for_loss, which the same per-image runs compare with one process.
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "support/support.h"

namespace training_controls_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// A run whose loss is a mean of per-image terms: the backbone is frozen (eval mode, so its
// BatchNorm uses running statistics), the MLP head has no batch-dependent layer, ArcFace is a
// mean cross-entropy, and the random sampler's batches of 2B are pairs of consecutive batches of
// B. Accumulating two batches of B is then one batch of 2B, up to float rounding.
std::string per_image_config(const fs::path& logs, int64_t bs_train, const std::string& extra) {
  return "pipeline: extractor\nseed: 5\nnum_threads: 1\nnum_workers: 1\n"
         "dataset_root: " +
         fashion_mnist_subset().string() + "\nlogs_root: " + logs.string() +
         "\nrun_name: run\n"
         "transforms_train: {name: norm}\ntransforms_val: {name: norm}\n"
         "sampler: null\nbs_train: " +
         std::to_string(bs_train) +
         "\nextractor: {name: extractor_with_mlp, args: {extractor: {name: conv_net, args: {channels: [8, "
         "16, "
         "16], feat_dim: 16}}, mlp_features: [16], train_backbone: false}}\n"
         "criterion: {name: arcface, args: {m: 0.3, s: 16}}\n"
         "optimizer: {name: sgd, args: {lr: 0.5}}\n"
         "bs_val: 64\n"
         "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}\n" +
         (extra.find("max_epochs:") == std::string::npos ? "max_epochs: 2\n" : "") + extra;
}

struct Run {
  CommandResult result;
  fs::path dir;  ///< the run directory (logs/run)
};

Run train(const TempDir& tmp, const std::string& name, const std::string& yaml,
          const std::string& args = "") {
  const fs::path config = tmp / (name + ".yaml");
  write_file(config, yaml);
  Run run{run_oml("oml-train", "--config " + quote(config.string()) + " " + args, 600), tmp / name / "run"};
  return run;
}

Run train_ok(const TempDir& tmp, const std::string& name, const std::string& yaml,
             const std::string& args = "") {
  Run run = train(tmp, name, yaml, args);
  INFO(name << ":\n" << run.result.out << run.result.err);
  REQUIRE(run.result.exit_code == 0);
  return run;
}

oml::io::StateDict last_weights(const Run& run) {
  return oml::io::load_checkpoint(run.dir / "checkpoints" / "last.ckpt").state_dict;
}

double max_difference(const oml::io::StateDict& a, const oml::io::StateDict& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (const auto& [key, tensor] : a) {
    INFO(key);
    REQUIRE(b.count(key) == 1);
    if (tensor.is_floating_point()) worst = std::max(worst, max_abs_diff(tensor, b.at(key)));
  }
  return worst;
}

std::vector<int64_t> logged_steps(const Run& run) {
  std::vector<int64_t> steps;
  for (const auto& record : read_jsonl(run.dir / "train.jsonl"))
    steps.push_back(record.at("step").get<int64_t>());
  return steps;
}

// How many times `what` occurs in `text` (a line every rank logs).
std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "accumulate_grad_batches: 2 batches of B train the same weights as batches of 2B (a per-image mean loss)",
    "[pipelines][integration][controls]") {
  TempDir tmp;
  // 6 batches of 8 per epoch, stepping every 2, against 3 batches of 16.
  const Run accumulated = train_ok(
      tmp, "accumulated",
      per_image_config(tmp / "accumulated", 8, "accumulate_grad_batches: 2\nlimit_train_batches: 6\n"));
  const Run whole = train_ok(tmp, "whole", per_image_config(tmp / "whole", 16, "limit_train_batches: 3\n"));
  CHECK(logged_steps(accumulated) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(logged_steps(whole) == logged_steps(accumulated));
  CHECK(max_difference(last_weights(accumulated), last_weights(whole)) < 1e-5);
  // And training did something: the head moved away from a run without accumulation's weights.
  const Run unaccumulated =
      train_ok(tmp, "unaccumulated", per_image_config(tmp / "unaccumulated", 8, "limit_train_batches: 6\n"));
  CHECK(max_difference(last_weights(unaccumulated), last_weights(whole)) > 1e-4);
}

TEST_CASE("accumulate_grad_batches steps after the epoch's last batch too, and works across two ranks",
          "[pipelines][integration][controls][ddp]") {
  TempDir tmp;
  // 5 batches, 2 per step: steps after batches 2, 4 and 5 (Lightning's last, shorter group).
  const Run odd = train_ok(
      tmp, "odd", per_image_config(tmp / "odd", 8, "accumulate_grad_batches: 2\nlimit_train_batches: 5\n"));
  CHECK(logged_steps(odd) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(oml::io::load_checkpoint(odd.dir / "checkpoints" / "last.ckpt").step == 6);
  // check_params_every: 1 fails the run if the ranks' parameters ever differ after a step.
  const Run ranks = train_ok(
      tmp, "ranks", train_config(tmp / "ranks", "accumulate_grad_batches: 2\nddp: {check_params_every: 1}\n"),
      "--nproc-per-node 2");
  const auto steps = read_jsonl(ranks.dir / "train.jsonl");
  REQUIRE_FALSE(steps.empty());
  CHECK(oml::io::load_checkpoint(ranks.dir / "checkpoints" / "last.ckpt").step ==
        static_cast<int64_t>(steps.size()));
}

TEST_CASE("deterministic: true is in force in every training process and, on the CPU, changes no result",
          "[pipelines][integration][controls][determinism]") {
  TempDir tmp;
  const std::string short_run = "max_epochs: 1\nlimit_train_batches: 3\n";
  const Run plain = train_ok(tmp, "plain", per_image_config(tmp / "plain", 8, short_run));
  CHECK_THAT(plain.result.err, !Contains("deterministic mode"));
  const Run deterministic = train_ok(
      tmp, "deterministic", per_image_config(tmp / "deterministic", 8, short_run + "deterministic: true\n"));
  // What ATen's context reports in the training process, read back after setting it.
  CHECK_THAT(deterministic.result.err,
             Contains("deterministic mode: deterministic algorithms on (errors), cuDNN deterministic, "
                      "cuDNN benchmark off, CUBLAS_WORKSPACE_CONFIG="));
  CHECK_THAT(read_file(deterministic.dir / "config.yaml"), Contains("deterministic: true"));
  // On the CPU training is bit-reproducible already: the same numbers (the timing field aside).
  auto without_timing = [](const Run& run) {
    auto records = read_jsonl(run.dir / "train.jsonl");
    for (auto& record : records) record.erase("samples_per_s");
    return records;
  };
  CHECK(without_timing(deterministic) == without_timing(plain));
  CHECK(read_jsonl(deterministic.dir / "metrics.jsonl") == read_jsonl(plain.dir / "metrics.jsonl"));

  // OML's form, "warn", under DDP: every rank turns it on.
  const Run ranks = train_ok(
      tmp, "ranks",
      per_image_config(tmp / "ranks", 8, short_run + "lightning_trainer_extra_args: {deterministic: warn}\n"),
      "--nproc-per-node 2");
  const std::string& err = ranks.result.err;
  INFO(err);
  CHECK(occurrences(err, "deterministic algorithms on (warnings)") == 2);
}

TEST_CASE("benchmark and float32_matmul_precision are in force in every training process",
          "[pipelines][integration][controls]") {
  TempDir tmp;
  const std::string short_run = "max_epochs: 1\nlimit_train_batches: 2\n";
  const Run plain = train_ok(tmp, "plain", per_image_config(tmp / "plain", 8, short_run));
  CHECK_THAT(plain.result.err, !Contains("cuDNN benchmark"));
  // Lightning's Trainer argument in OML's block, torch's setting at the top level, on two ranks;
  // each logs what ATen's context reports once they are set.
  const Run ranks = train_ok(tmp, "ranks",
                             per_image_config(tmp / "ranks", 8,
                                              short_run + "lightning_trainer_extra_args: {benchmark: true}\n"
                                                          "float32_matmul_precision: high\n"),
                             "--nproc-per-node 2");
  const std::string& err = ranks.result.err;
  INFO(err);
  CHECK(occurrences(err, "cuDNN benchmark on, float32 matmul precision high (cuBLAS may use TF32)") == 2);
  // With deterministic, Lightning's warning: PyTorch ignores cuDNN's deterministic flag then.
  const Run both = train_ok(
      tmp, "both", per_image_config(tmp / "both", 8, short_run + "deterministic: true\nbenchmark: true\n"));
  CHECK_THAT(both.result.err, Contains("warning: benchmark: true with deterministic"));
  CHECK_THAT(both.result.err, Contains("cuDNN benchmark on, float32 matmul precision highest"));
}

TEST_CASE(
    "gradient_clip_val bounds each step as clip_grad_norm_ / clip_grad_value_ do, a huge one changes nothing",
    "[pipelines][integration][controls]") {
  TempDir tmp;
  const Run start =
      train_ok(tmp, "start", per_image_config(tmp / "start", 8, "limit_train_batches: 2\nmax_epochs: 1\n"));
  const fs::path weights = start.dir / "checkpoints" / "last.ckpt";
  // From trained weights with the backbone training too (its BatchNorm statistics move anyway,
  // so only parameters are compared), lr 1 and 3 steps.
  const auto from_start = [&](const std::string& name, const std::string& extra) {
    std::string yaml = per_image_config(tmp / name, 8, "limit_train_batches: 3\nmax_epochs: 1\n" + extra);
    const std::string frozen = "mlp_features: [16], train_backbone: false}}";
    yaml.replace(yaml.find(frozen), frozen.size(), "mlp_features: [16], weights: " + weights.string() + "}}");
    yaml.replace(yaml.find("lr: 0.5"), 7, "lr: 1.0");
    return last_weights(train_ok(tmp, name, yaml));
  };
  const auto trained = oml::io::load_checkpoint(weights).state_dict;
  const auto parameter_change = [&](const oml::io::StateDict& after, bool norm) {
    double max = 0, squares = 0;
    for (const auto& [key, tensor] : after) {
      if (key.find("running_") != std::string::npos || key.find("num_batches") != std::string::npos) continue;
      const auto delta = (tensor - trained.at(key)).to(torch::kDouble);
      max = std::max(max, delta.abs().max().item<double>());
      squares += delta.pow(2).sum().item<double>();
    }
    return norm ? std::sqrt(squares) : max;
  };
  const auto plain = from_start("plain", "");
  CHECK(parameter_change(plain, false) > 1e-3);
  // Each step moves every parameter by at most lr x val (value), or all of them together by at
  // most lr x val in 2-norm (norm); ArcFace's weights are clipped with them but not compared.
  CHECK(parameter_change(from_start("value", "gradient_clip_val: 1.0e-4\ngradient_clip_algorithm: value\n"),
                         false) <= 3 * 1e-4 + 1e-7);
  CHECK(parameter_change(from_start("norm", "gradient_clip_val: 1.0e-4\n"), true) <= 3 * 1e-4 + 1e-7);
  const auto huge = from_start("huge", "lightning_trainer_extra_args: {gradient_clip_val: 1.0e+9}\n");
  CHECK(max_difference(huge, plain) == 0.0);
}

TEST_CASE("limit_train_batches and limit_val_batches count batches (an int) or a fraction of them (a float)",
          "[pipelines][integration][controls]") {
  TempDir tmp;
  // The subset's 300 train images in batches of 8: 37 per epoch.
  const Run count = train_ok(
      tmp, "count", per_image_config(tmp / "count", 8, "limit_train_batches: 4\nlimit_val_batches: 1\n"));
  CHECK(logged_steps(count) == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK_THAT(count.result.out + count.result.err,
             Contains("validating on 1 of 5 batches (64 of 300 validation rows)"));
  CHECK(read_jsonl(count.dir / "metrics.jsonl").size() == 2);

  const Run fraction =
      train_ok(tmp, "fraction",
               per_image_config(tmp / "fraction", 8,
                                "max_epochs: 1\nlimit_train_batches: 0.25\nlimit_val_batches: 0.5\n"));
  CHECK(logged_steps(fraction).size() == 9);  // int(37 x 0.25)
  CHECK_THAT(fraction.result.out + fraction.result.err, Contains("validating on 2 of 5 batches"));

  const Run no_validation = train_ok(
      tmp, "none",
      per_image_config(tmp / "none", 8, "max_epochs: 1\nlimit_train_batches: 1\nlimit_val_batches: 0\n"));
  CHECK_FALSE(fs::exists(no_validation.dir / "checkpoints" / "best.ckpt"));

  const Run too_small =
      train(tmp, "small", per_image_config(tmp / "small", 8, "limit_train_batches: 0.01\n"));
  CHECK(too_small.result.exit_code == 2);
  CHECK_THAT(too_small.result.err, Contains("limit_train_batches") && Contains("less than one batch"));
}

TEST_CASE("check_val_every_n_epoch is valid_period, also inside lightning_trainer_extra_args",
          "[pipelines][integration][controls]") {
  TempDir tmp;
  // Validation after epochs 2 and 3 (the last one is always validated).
  const Run run = train_ok(tmp, "period",
                           per_image_config(tmp / "period", 8,
                                            "max_epochs: 3\nlimit_train_batches: 1\n"
                                            "lightning_trainer_extra_args: {check_val_every_n_epoch: 2}\n"));
  const auto records = read_jsonl(run.dir / "metrics.jsonl");
  CHECK(records.size() == 2);
}

TEST_CASE(
    "early_stopping stops after `patience` validations without improvement, says why, and resumes its count",
    "[pipelines][integration][controls]") {
  TempDir tmp;
  // min_delta 1: a cmc@1 in [0, 1] never improves on the first value by more than 1.
  const std::string stopping =
      "limit_train_batches: 1\nearly_stopping: {monitor: OVERALL/cmc/1, mode: max, patience: 2, min_delta: "
      "1.0}\n";
  const Run run = train_ok(tmp, "stop", per_image_config(tmp / "stop", 8, stopping + "max_epochs: 10\n"));
  const std::string output = run.result.out + run.result.err;
  CHECK_THAT(output,
             Contains("early stopping after epoch 3: Monitored metric OVERALL/cmc/1 did not improve in the "
                      "last 2 records. Best score: "));
  CHECK(read_jsonl(run.dir / "metrics.jsonl").size() == 3);
  CHECK(oml::io::load_checkpoint(run.dir / "checkpoints" / "last.ckpt").epoch == 3);

  // Stopped by max_epochs after one validation without improvement, then resumed: the count
  // continues from the checkpoint, so one more validation stops it.
  train_ok(tmp, "first", per_image_config(tmp / "resumed", 8, stopping + "max_epochs: 2\n"));
  const fs::path last = tmp / "resumed" / "run" / "checkpoints" / "last.ckpt";
  const Run resumed =
      train_ok(tmp, "second", per_image_config(tmp / "resumed", 8, stopping + "max_epochs: 10\n"),
               "--resume " + quote(last.string()));
  CHECK_THAT(resumed.result.out + resumed.result.err, Contains("early stopping after epoch 3"));
}

TEST_CASE("max_time stops training after the step that reaches it, and a resumed run counts its earlier time",
          "[pipelines][integration][controls]") {
  TempDir tmp;
  // As OML's test configs give it, in lightning_trainer_extra_args; 100 epochs would take minutes.
  const std::string limited = "max_epochs: 100\nlightning_trainer_extra_args: {max_time: \"00:00:00:02\"}\n";
  const Run run = train_ok(tmp, "timed", per_image_config(tmp / "timed", 8, limited));
  CHECK_THAT(run.result.out + run.result.err, Contains("max_time reached: trained for 2 s of 2 s"));
  const auto last = oml::io::load_checkpoint(run.dir / "checkpoints" / "last.ckpt");
  REQUIRE(last.resume);
  REQUIRE(last.resume->training_time_s);
  CHECK(*last.resume->training_time_s >= 2.0);
  const int64_t steps = last.step;
  CHECK(steps >= 1);
  CHECK(last.epoch < 100);
  // The run stopped inside the training and validated once more, at the stop.
  CHECK(logged_steps(run).back() == steps);
  CHECK(read_jsonl(run.dir / "metrics.jsonl").back().at("step") == steps);

  // Resumed with the same limit: its 2 s are spent, so one more step and it stops again.
  const Run resumed = train_ok(tmp, "timed2", per_image_config(tmp / "timed", 8, limited),
                               "--resume " + quote((run.dir / "checkpoints" / "last.ckpt").string()));
  CHECK_THAT(resumed.result.out + resumed.result.err,
             Contains("stopping after step " + std::to_string(steps + 1)));
}

namespace {

// A Chrome trace's complete events ("ph": "X"): Kineto writes {"traceEvents": [...]}, 1.13's
// legacy profiler a bare list.
struct TraceEvent {
  std::string name;
  double start = 0, end = 0;  // microseconds
};

std::vector<TraceEvent> trace_events(const fs::path& path) {
  const nlohmann::json trace = nlohmann::json::parse(read_file(path));
  const nlohmann::json& events = trace.is_object() ? trace.at("traceEvents") : trace;
  std::vector<TraceEvent> out;
  for (const auto& event : events) {
    if (!event.contains("name") || !event.at("name").is_string() || event.value("ph", "") != "X") continue;
    const double ts = event.at("ts").is_number() ? event.at("ts").get<double>()
                                                 : std::stod(event.at("ts").get<std::string>());
    const double dur = event.at("dur").is_number() ? event.at("dur").get<double>()
                                                   : std::stod(event.at("dur").get<std::string>());
    out.push_back({event.at("name").get<std::string>(), ts, ts + dur});
  }
  return out;
}

std::set<std::string> names_of(const std::vector<TraceEvent>& events) {
  std::set<std::string> names;
  for (const auto& e : events) names.insert(e.name);
  return names;
}

const TraceEvent& only(const std::vector<TraceEvent>& events, const std::string& name) {
  const auto found =
      std::find_if(events.begin(), events.end(), [&](const TraceEvent& e) { return e.name == name; });
  REQUIRE(found != events.end());
  CHECK(std::count_if(events.begin(), events.end(), [&](const TraceEvent& e) { return e.name == name; }) ==
        1);
  return *found;
}

}  // namespace

TEST_CASE(
    "oml-train --profile FROM:TO writes a Chrome trace of those steps with the step's phases and LibTorch's "
    "operators",
    "[pipelines][integration][controls][profile]") {
  TempDir tmp;
  // Two batches an epoch: step 2 ends epoch 1, step 3 starts epoch 2.
  const Run run =
      train_ok(tmp, "profiled",
               per_image_config(tmp / "profiled", 8, "max_steps: 4\nmax_epochs: 3\nlimit_train_batches: 2\n"),
               "--profile 2:3");
  const fs::path trace = run.dir / "profile" / "rank0.steps_2-3.pt.trace.json";
  INFO(run.result.out << run.result.err);
  REQUIRE(fs::is_regular_file(trace));
  CHECK_THAT(run.result.out + run.result.err,
             Contains("profile (steps 2 to 3) written to " + trace.string()));
  const std::vector<TraceEvent> events = trace_events(trace);
  const std::set<std::string> names = names_of(events);
  const TraceEvent& step2 = only(events, "ProfilerStep#2");
  const TraceEvent& step3 = only(events, "ProfilerStep#3");
  CHECK(names.count("ProfilerStep#1") == 0);  // before the range: not recorded
  CHECK(names.count("ProfilerStep#4") == 0);  // after it
  // Every phase of a step, inside one of the two steps.
  for (const char* phase :
       {"oml::data_wait", "oml::forward", "oml::loss", "oml::backward", "oml::optimizer", "oml::logging"}) {
    INFO(phase);
    CHECK(std::count_if(events.begin(), events.end(), [&](const TraceEvent& e) { return e.name == phase; }) >=
          2);
    for (const auto& e : events) {
      if (e.name != phase) continue;
      const bool inside =
          (e.start >= step2.start && e.end <= step2.end) || (e.start >= step3.start && e.end <= step3.end);
      CHECK(inside);
    }
  }
  // The epoch's end and the next one's start, between the two steps.
  for (const char* between : {"oml::epoch_end", "oml::epoch_start"}) {
    INFO(between);
    const TraceEvent& e = only(events, between);
    CHECK(e.start >= step2.end);
    CHECK(e.end <= step3.start);
  }
  // LibTorch's own operators, inside those ranges.
  CHECK(names.count("aten::conv2d") == 1);
  CHECK(std::count_if(names.begin(), names.end(),
                      [](const std::string& n) { return n.rfind("aten::", 0) == 0; }) > 10);
  // Training is unchanged by it: all four steps logged.
  CHECK(logged_steps(run) == std::vector<int64_t>{1, 2, 3, 4});
  // Nothing half-written left beside it.
  for (const auto& entry : fs::directory_iterator(run.dir / "profile")) CHECK(entry.path() == trace);

  // A run that stops inside the range writes the steps it took, and says so; the config key
  // is the flag's equivalent.
  const Run stopped =
      train_ok(tmp, "stopped", per_image_config(tmp / "stopped", 8, "max_steps: 4\nprofile: \"3:10\"\n"));
  const fs::path partial = stopped.dir / "profile" / "rank0.steps_3-10.pt.trace.json";
  REQUIRE(fs::is_regular_file(partial));
  CHECK_THAT(stopped.result.out + stopped.result.err,
             Contains("training ended before step 10 of profile \"3:10\"") &&
                 Contains("profile (steps 3 to 4) written to"));
  const std::set<std::string> partial_names = names_of(trace_events(partial));
  CHECK(partial_names.count("ProfilerStep#3") == 1);
  CHECK(partial_names.count("ProfilerStep#4") == 1);
  CHECK(partial_names.count("ProfilerStep#5") == 0);

  // A range the run never reaches: said at the end, nothing written.
  const Run early =
      train_ok(tmp, "early", per_image_config(tmp / "early", 8, "max_steps: 2\n"), "--profile 5:6");
  CHECK_THAT(
      early.result.out + early.result.err,
      Contains("profile \"5:6\": training ended after step 2, before the range; nothing was recorded"));
  CHECK_FALSE(fs::exists(early.dir / "profile"));

  // A bad range is exit 2 naming the flag, before anything is created.
  for (const std::string bad : {"4:2", "\"\"", "x"}) {
    INFO(bad);
    const Run refused =
        train(tmp, "bad", per_image_config(tmp / "bad", 8, "max_steps: 4\n"), "--profile " + bad);
    CHECK(refused.result.exit_code == 2);
    CHECK_THAT(refused.result.err, Contains("--profile: "));
    CHECK_FALSE(fs::exists(refused.dir));
  }
}

TEST_CASE("Bad training controls exit 2 naming each key, all at once", "[pipelines][integration][controls]") {
  TempDir tmp;
  const Run bad =
      train(tmp, "bad",
            per_image_config(tmp / "bad", 8,
                             "accumulate_grad_batches: 0\n"
                             "gradient_clip_algorithm: l2\n"
                             "limit_val_batches: 1.5\n"
                             "early_stopping: {patience: 2}\n"
                             "lightning_trainer_extra_args: {max_time: 10, gradient_clip_val: -1}\n"));
  CHECK(bad.result.exit_code == 2);
  const std::string& err = bad.result.err;
  CHECK_THAT(err, Contains("accumulate_grad_batches") && Contains("expected a positive number of batches"));
  CHECK_THAT(err, Contains("gradient_clip_algorithm") && Contains("expected one of norm, value, got 'l2'"));
  CHECK_THAT(err, Contains("limit_val_batches") && Contains("[0.0, 1.0]"));
  CHECK_THAT(err, Contains("missing required key 'monitor'"));
  CHECK_THAT(err, Contains("lightning_trainer_extra_args.max_time") && Contains("DD:HH:MM:SS"));
  CHECK_THAT(err, Contains("gradient_clip_val") && Contains("expected a finite number >= 0"));

  const Run twice = train(tmp, "twice",
                          per_image_config(tmp / "twice", 8,
                                           "valid_period: 2\naccumulate_grad_batches: 2\n"
                                           "lightning_trainer_extra_args: {check_val_every_n_epoch: 2, "
                                           "accumulate_grad_batches: 2, early_stopping: {}}\n"));
  CHECK(twice.result.exit_code == 2);
  CHECK_THAT(twice.result.err, Contains("'check_val_every_n_epoch' is also given at") &&
                                   Contains("'accumulate_grad_batches' is also given at") &&
                                   Contains("early stopping is a Lightning callback"));

  const Run unknown_metric =
      train(tmp, "metric", per_image_config(tmp / "metric", 8, "early_stopping: {monitor: OVERALL/cmc/7}\n"));
  CHECK(unknown_metric.result.exit_code == 2);
  CHECK_THAT(unknown_metric.result.err, Contains("early_stopping.monitor") && Contains("OVERALL/cmc/7"));
}

TEST_CASE("ddp.gather_embeddings_for_loss: 2 ranks with batch B train as one process with batch 2B",
          "[pipelines][integration][ddp]") {
  TempDir tmp;
  // The per-image run with a loss over every pair of its batch (PML's multi-similarity, which
  // weighs each pair against the batch's other pairs): without gathering, 2 ranks with batch 8 see
  // 8 rows each; with it, the 16 rows of the step, which the random sampler deals to the 2 ranks by
  // alternating positions of the batch of 16 one process takes (docs/ddp.md). (A triplet loss
  // with hard mining matches too, but this frozen backbone's embeddings start nearly collapsed,
  // where its Euclidean distances lose digits to cancellation differently for another row order.)
  const auto config = [&](const std::string& name, int64_t batch, const std::string& extra) {
    std::string yaml = per_image_config(tmp / name, batch, "limit_train_batches: 4\nmax_epochs: 1\n" + extra);
    const std::string arcface = "{name: arcface, args: {m: 0.3, s: 16}}";
    yaml.replace(yaml.find(arcface), arcface.size(), "{name: multi_similarity}");
    return yaml;
  };
  const auto losses = [](const Run& run) {
    std::vector<double> out;
    for (const auto& record : read_jsonl(run.dir / "train.jsonl"))
      out.push_back(record.at("loss").get<double>());
    return out;
  };
  const Run one = train_ok(tmp, "one", config("one", 16, ""));
  const Run gathered =
      train_ok(tmp, "gathered", config("gathered", 8, "ddp: {gather_embeddings_for_loss: true}\n"),
               "--nproc-per-node 2");
  CHECK_THAT(gathered.result.out + gathered.result.err,
             Contains("every rank's loss sees the embeddings and labels of all 2 ranks' batches"));
  const auto expected = losses(one);
  REQUIRE(expected.size() == 4);
  const auto got = losses(gathered);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(got[i] == Approx(expected[i]).epsilon(1e-5));
  }
  CHECK(max_difference(last_weights(gathered), last_weights(one)) <= 1e-5);
  // Without gathering each rank mines its own 8 rows: another loss.
  const Run separate = train_ok(tmp, "separate", config("separate", 8, ""), "--nproc-per-node 2");
  CHECK(std::abs(losses(separate).at(0) - expected[0]) > 1e-3);

  // With accumulation, bfloat16 autocast and bf16 gradient compression together, the ranks stay
  // identical (check_params_every: 1 fails the run otherwise), and the first step's loss is one
  // process's with the same accumulation and autocast (to bfloat16 rounding: compression only
  // rounds the gradients, which the first loss precedes).
  const std::string mixed = "accumulate_grad_batches: 2\nprecision: bf16\n";
  const Run one_mixed = train_ok(tmp, "one_mixed", config("one_mixed", 16, mixed));
  const Run ranks_mixed =
      train_ok(tmp, "ranks_mixed",
               config("ranks_mixed", 8,
                      mixed + "ddp: {gather_embeddings_for_loss: true, gradient_compression: "
                              "bf16, check_params_every: 1}\n"),
               "--nproc-per-node 2");
  const auto mixed_expected = losses(one_mixed);
  const auto mixed_got = losses(ranks_mixed);
  REQUIRE(mixed_got.size() == 2);  // 4 batches, 2 per step
  REQUIRE(mixed_expected.size() == 2);
  CHECK(mixed_got[0] == Approx(mixed_expected[0]).epsilon(1e-2));
  CHECK(std::isfinite(mixed_got[1]));
}

TEST_CASE(
    "A plateau scheduler monitoring OML's triplet_loss_epoch steps at each epoch's end with the mean loss",
    "[controls][integration]") {
  TempDir tmp;
  // OML's train_with_bboxes.yaml: ReduceLROnPlateau on `triplet_loss_epoch`, Lightning's name of
  // the epoch mean of the loss OML logs as "triplet_loss". Validation only after the last epoch,
  // so the scheduler's steps come from the training loss alone. patience 100: it only records.
  const Run run = train_ok(tmp, "plateau",
                           train_config(tmp / "plateau",
                                        "scheduling: {scheduler: {name: reduce_on_plateau, args: {mode: min, "
                                        "patience: 100}}, monitor_metric: triplet_loss_epoch}\n"),
                           "--set max_epochs=3 --set valid_period=3");
  // Each epoch's mean of the logged step losses (equal P x K batches: the row-weighted mean).
  std::map<int64_t, std::pair<double, int>> sums;
  for (const auto& record : read_jsonl(run.dir / "train.jsonl")) {
    auto& [sum, count] = sums[record.at("epoch").get<int64_t>()];
    sum += record.at("loss").get<double>();
    ++count;
  }
  REQUIRE(sums.size() == 3);
  // torch's ReduceLROnPlateau (mode min, relative threshold 1e-4) over those three values.
  std::optional<double> best;
  for (const auto& [epoch, sum_count] : sums) {
    const double mean = sum_count.first / sum_count.second;
    if (!best || mean < *best * (1 - 1e-4)) best = mean;
  }
  const auto checkpoint = oml::io::load_checkpoint(run.dir / "checkpoints" / "last.ckpt");
  REQUIRE(checkpoint.resume.has_value());
  const auto state = checkpoint.resume->scheduler.toGenericDict();
  CHECK(state.at("step").toInt() == 3);  // once per epoch, not only at the one validation
  CHECK(state.at("best").toDouble() == Approx(*best).epsilon(1e-9));

  // Lightning's other name of the same value, and no validation at all: the loss needs none (a
  // validation metric would be refused).
  const Run plain =
      train_ok(tmp, "loss_key",
               train_config(tmp / "loss_key",
                            "limit_val_batches: 0\nscheduling: {scheduler: {name: reduce_on_plateau, "
                            "args: {mode: min}}, monitor_metric: triplet_loss}\n"));
  CHECK_FALSE(fs::exists(plain.dir / "metrics.jsonl"));
  CHECK(oml::io::load_checkpoint(plain.dir / "checkpoints" / "last.ckpt")
            .resume->scheduler.toGenericDict()
            .at("step")
            .toInt() == 2);
}

TEST_CASE("A monitored key that is neither a metric nor the training loss is exit 2 before training",
          "[controls][integration]") {
  TempDir dir;
  const auto refused = [&](const std::string& name, const std::string& extra) {
    write_file(dir / (name + ".yaml"), train_config(dir / name, extra));
    const auto r = run_oml("oml-train", "--config " + quote((dir / (name + ".yaml")).string()));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("internal error") == std::string::npos);
    CHECK_FALSE(fs::exists(dir / name / "run" / "train.jsonl"));  // refused before any step
    return r.err;
  };
  // The loss of another criterion (this run's is triplet_with_miner: "triplet_loss").
  CHECK_THAT(refused("arcface_key",
                     "scheduling: {scheduler: {name: reduce_on_plateau}, "
                     "monitor_metric: arcface_loss_epoch}\n"),
             Contains("scheduling.monitor_metric") && Contains("'arcface_loss_epoch' is neither") &&
                 Contains("OVERALL/cmc/1") && Contains("'triplet_loss_epoch'"));
  // A category's key whose metric is not computed, and a plateau scheduler stepped per step.
  CHECK_THAT(refused("category_key", "metric_for_checkpointing: shirts/cmc/7\n"),
             Contains("metric_for_checkpointing") && Contains("'shirts/cmc/7'"));
  CHECK_THAT(refused("per_step",
                     "scheduling: {scheduler: {name: reduce_on_plateau}, scheduler_interval: step, "
                     "monitor_metric: OVERALL/cmc/1}\n"),
             Contains("scheduling.scheduler_interval") && Contains("scheduler_interval: epoch"));
}

}  // namespace training_controls_tests
