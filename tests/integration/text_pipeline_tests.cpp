// Text through the extractor pipelines, as a user runs them: oml-train and oml-validate on a text
// dataframe with `extractor: {name: hf_text_encoder, args: {model_dir: ...}}` (one process and two
// ranks), and the mismatches a user meets (a text model with an image dataframe and the reverse,
// image settings in a text run). The model is the tiny BERT of tests/support/text_fixtures.h,
// written into the test's folder: nothing is downloaded. Predicting, indexing, searching and
// serving texts: text_serving_tests.cpp.
#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "integration/pipeline_fixtures.h"
#include "integration/text_run_fixtures.h"
#include "support/support.h"
#include "support/text_fixtures.h"

namespace text_pipeline_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// The same shape as images: files that exist (never decoded: the runs stop before loading them).
void write_image_dataframe(const fs::path& dir) {
  std::string csv = "label,path,split,is_query,is_gallery\n";
  for (int label = 0; label < 8; ++label) {
    for (int item = 0; item < 4; ++item) {
      const std::string name = "img_" + std::to_string(label) + "_" + std::to_string(item) + ".png";
      write_file(dir / name, "not decoded");
      csv += std::to_string(label) + "," + name + ",train,,\n";
    }
  }
  write_file(dir / "df.csv", csv);
}

// oml-validate on the run's best.ckpt, with `overrides`, writes under logs/`run_name` the metrics
// training logged for that checkpoint.
void check_validation_reproduces(const TempDir& dir, const fs::path& run, const std::string& overrides,
                                 const std::string& run_name) {
  write_file(dir / "validate.yaml", text_validate_config(dir, run / "checkpoints" / "best.ckpt"));
  const auto validate =
      run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()) + " " + overrides);
  INFO(validate.out << validate.err);
  REQUIRE(validate.exit_code == 0);
  check_same_metrics(best_metrics(run), metrics_json(dir / "logs" / run_name / "metrics.json"));
}

}  // namespace

TEST_CASE("A text encoder trains on a text dataframe and validates its checkpoint",
          "[pipelines][integration][text]") {
  TempDir dir;
  write_text_run(dir);
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  CHECK_THAT(train.out + train.err, Contains("tokenized by " + (dir / "model" / "tokenizer.json").string()) &&
                                        Contains("truncated to 32 tokens"));
  const fs::path run = dir / "logs" / "run";
  for (const char* file :
       {"train.jsonl", "metrics.jsonl", "checkpoints/best.ckpt", "checkpoints/last.ckpt"}) {
    INFO(file);
    CHECK(fs::exists(run / file));
  }
  // 2 epochs x 3 batches of 4 labels x 2 texts; every loss finite and logged with the miner's numbers.
  const auto steps = read_jsonl(run / "train.jsonl");
  REQUIRE(steps.size() == 6);
  for (const auto& step : steps) {
    INFO(step.dump());
    REQUIRE(step.contains("loss"));
    CHECK(std::isfinite(step.at("loss").get<double>()));
    CHECK(step.at("loss").get<double>() >= 0.0);
    CHECK(step.contains("active_tri"));
    CHECK(step.at("samples_per_s").get<double>() > 0.0);
  }
  // Validated after each epoch on the 12 validation texts.
  const auto validations = read_jsonl(run / "metrics.jsonl");
  REQUIRE(validations.size() == 2);
  for (const auto& record : validations) {
    const auto metrics = record.at("metrics").get<std::map<std::string, double>>();
    for (const char* key : {"OVERALL/cmc/1", "OVERALL/cmc/3", "OVERALL/map/3"}) {
      INFO(key);
      REQUIRE(metrics.count(key) == 1);
      CHECK(metrics.at(key) >= 0.0);
      CHECK(metrics.at(key) <= 1.0);
    }
  }

  // oml-validate on best.ckpt reproduces the metrics training logged for it ...
  check_validation_reproduces(dir, run, "", "validation");
  // ... and so do other batches, padded to other lengths: padding changes no embedding.
  check_validation_reproduces(dir, run, "--set bs_val=3 --set run_name=rebatched", "rebatched");
}

TEST_CASE("Two-rank DDP training on texts validates as one process does",
          "[pipelines][ddp][integration][text]") {
  TempDir dir;
  write_text_run(dir);
  const auto train =
      run_oml("oml-train", "--nproc-per-node 2 --config " + quote((dir / "train.yaml").string()));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  // 3 batches per epoch dealt to 2 ranks (padded): 2 steps per epoch.
  const auto steps = read_jsonl(run / "train.jsonl");
  REQUIRE(steps.size() == 4);
  for (const auto& step : steps) CHECK(std::isfinite(step.at("loss").get<double>()));
  REQUIRE(read_jsonl(run / "metrics.jsonl").size() == 2);
  // Each rank embedded its share of the validation texts in batches of its own; merged, they give
  // the metrics one process computes from best.ckpt.
  check_validation_reproduces(dir, run, "", "validation");
}

TEST_CASE("A text model and an image dataframe (or the reverse) are a config error naming both",
          "[pipelines][integration][text]") {
  TempDir dir;
  write_text_run(dir);
  const std::string config = "--config " + quote((dir / "train.yaml").string());

  SECTION("a text extractor with an image dataframe") {
    write_image_dataframe(dir / "images");
    const auto r = run_oml("oml-train", config + " --set dataset_root=" + quote((dir / "images").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("train.yaml:") &&
                          Contains("extractor 'hf_text_encoder' reads texts (tokens)") &&
                          Contains("has no 'text' column"));
  }
  SECTION("an image extractor with a text dataframe") {
    const auto r = run_oml("oml-train", config + " --set " +
                                            quote("extractor={name: conv_net, args: {channels: [8, 16], "
                                                  "feat_dim: 8}}") +
                                            " --set " + quote("transforms_train={name: norm}"));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("extractor 'conv_net' reads images") && Contains("is a text dataframe") &&
                          Contains("df.csv"));
  }
  SECTION("an image transform in a text run") {
    const auto r = run_oml("oml-train", config + " --set " + quote("transforms_train={name: norm}"));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("transforms_train") && Contains("is an image setting") &&
                          Contains("hf_text_encoder"));
  }
  SECTION("image grids in a text run") {
    const auto r = run_oml("oml-train", config + " --set log_images=true");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("log_images") && Contains("is an image setting"));
  }
  SECTION("a model folder without tokenizer.json") {
    fs::remove(dir / "model" / "tokenizer.json");
    const auto r = run_oml("oml-train", config);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains((dir / "model" / "tokenizer.json").string() + " does not exist"));
  }
  // Nothing was trained: no run directory was left behind by a refused run.
  CHECK_FALSE(fs::exists(dir / "logs" / "run" / "checkpoints" / "last.ckpt"));
}

}  // namespace text_pipeline_tests
