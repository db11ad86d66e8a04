// A metric from a plugin, used as a user uses it: oml-train --plugin librecall_metric.so with
// `metric_for_checkpointing: OVERALL/recall/5` chooses best.ckpt by it and records it like a
// built-in metric; oml-validate loads it from `plugins:`; config mistakes about it fail early
// and name the key and the plugin.
#include <torch/torch.h>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "support/support.h"

namespace metric_plugin_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

const std::string kKey = "OVERALL/recall/5";

std::string plugin_arg() { return "--plugin " + quote(OML_RECALL_PLUGIN) + " "; }

// A fixture config (pipeline_fixtures.h) with `metric_args: <metric_args>` instead of its own.
std::string with_metric_args(std::string config, const std::string& metric_args) {
  const std::string fixture_args = "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}\n";
  const std::size_t at = config.find(fixture_args);
  REQUIRE(at != std::string::npos);
  return config.replace(at, fixture_args.size(), "metric_args: " + metric_args + "\n");
}

// The fixture's training config with these metric_args and recall@5 choosing best.ckpt.
std::string recall_train_config(const fs::path& logs, const std::string& metric_args) {
  return with_metric_args(train_config(logs), metric_args) + "metric_for_checkpointing: " + kKey + "\n";
}

CommandResult train(const fs::path& dir, const std::string& config, const std::string& plugin) {
  write_file(dir / "train.yaml", config);
  return run_oml("oml-train",
                 plugin + "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=3");
}

}  // namespace

TEST_CASE("A plugin metric chooses the best checkpoint and is recorded like a built-in",
          "[pipelines][integration][plugins]") {
  TempDir dir;
  const auto r = train(
      dir.path(), recall_train_config(dir / "logs", "{cmc_top_k: [1], recall_top_k: [5, 10]}"), plugin_arg());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir / "logs" / "run";

  // Every validation record holds the plugin's keys, overall and per query average in [0, 1].
  const auto records = read_jsonl(run / "metrics.jsonl");
  REQUIRE(records.size() == 3);
  std::map<std::string, double> best;
  for (const auto& record : records) {
    const auto metrics = record.at("metrics").get<std::map<std::string, double>>();
    REQUIRE(metrics.count(kKey) == 1);
    CHECK(metrics.count("OVERALL/recall/10") == 1);
    CHECK(metrics.count("OVERALL/cmc/1") == 1);
    CHECK(metrics.at(kKey) >= 0.0);
    CHECK(metrics.at(kKey) <= 1.0);
    if (best.empty() || metrics.at(kKey) > best.at(kKey)) best = metrics;  // the first maximum
  }

  // best.ckpt holds the metrics of the validation with the highest recall@5; last.ckpt carries
  // that value as the run's best.
  const auto best_checkpoint = oml::io::load_checkpoint(run / "checkpoints" / "best.ckpt");
  check_same_metrics(best, best_checkpoint.metrics);
  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  REQUIRE(last.metrics.count("best/" + kKey) == 1);
  CHECK(last.metrics.at("best/" + kKey) == Approx(best.at(kKey)).margin(1e-12));
  CHECK_THAT(r.out, Contains("best checkpoint (" + kKey + ")"));
  CHECK_THAT(read_file(run / "report.html"), Contains(kKey));
  // TensorBoard: the scalar's tag is stored verbatim in the event file.
  std::string events;
  for (const auto& entry : fs::directory_iterator(run / "tensorboard")) events += read_file(entry.path());
  CHECK_THAT(events, Contains(kKey));

  // oml-validate with the plugin listed in the config reproduces the value.
  write_file(dir / "validate.yaml",
             "plugins: [" + std::string(OML_RECALL_PLUGIN) + "]\n" +
                 with_metric_args(validate_config(dir / "logs", run / "checkpoints" / "best.ckpt"),
                                  "{cmc_top_k: [1], recall_top_k: [5, 10]}"));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.err);
  REQUIRE(validate.exit_code == 0);
  const auto validated =
      read_json(dir / "logs" / "validation" / "metrics.json").get<std::map<std::string, double>>();
  REQUIRE(validated.count(kKey) == 1);
  CHECK(validated.at(kKey) == Approx(best.at(kKey)).margin(1e-6));
}

TEST_CASE("Config mistakes about a plugin metric fail before training and name the key",
          "[pipelines][integration][plugins]") {
  TempDir dir;
  SECTION("its key without the plugin") {
    const auto r = train(dir.path(), recall_train_config(dir / "logs", "{recall_top_k: [5]}"), "");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("metric_args.recall_top_k") && Contains("unknown key 'recall_top_k'"));
  }
  SECTION("the checkpoint metric without asking for it") {
    const auto r = train(dir.path(), recall_train_config(dir / "logs", "{cmc_top_k: [1]}"), plugin_arg());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("metric_for_checkpointing") && Contains("'" + kKey + "' is not computed") &&
                          Contains("OVERALL/cmc/1"));
  }
  SECTION("a bad value") {
    const auto r =
        train(dir.path(), recall_train_config(dir / "logs", "{recall_top_k: [5, 0]}"), plugin_arg());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("train.yaml:") && Contains("metric_args.recall_top_k") &&
                          Contains("metric 'recall': k values must be positive integers, got 0") &&
                          Contains("comes from plugin 'recall_metric'") && Contains("librecall_metric.so"));
  }
  CHECK_FALSE(fs::exists(dir / "logs" / "run" / "train.jsonl"));
}

}  // namespace metric_plugin_tests
