// oml-train's checkpoints as Lightning's ModelCheckpoint keys ask for them: what is written when
// (counted by a zero-second failpoint inside every write), the kept best checkpoints, a resume
// from each kind of checkpoint, and a background write that fails.
#include <nlohmann/json.hpp>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "support/support.h"

namespace checkpointing_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// Every write of these names prints "failpoint before_rename:<name>: pausing 0 s".
const std::string kCountWrites =
    "env OML_FAILPOINTS=before_rename:last.ckpt=pause:0,before_rename:best.ckpt=pause:0 ";

CommandResult train(const fs::path& config, const std::string& args = "", const std::string& env = "") {
  return run(env + quote(command_path("oml-train")) + " --progress quiet --config " + quote(config.string()) +
             " " + args);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int writes_of(const CommandResult& r, const std::string& name) {
  return count(r.err, "failpoint before_rename:" + name + ": pausing");
}

std::vector<std::string> checkpoint_files(const fs::path& run) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(run / "checkpoints"))
    names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// Six one-batch epochs (what makes per-epoch work visible), validated after epochs 3 and 6.
const std::string kShortEpochs = "--set sampler.args.epoch_size=1 --set max_epochs=6 --set valid_period=3";

}  // namespace

TEST_CASE("Without a trigger, one-batch epochs write last.ckpt at validations only, best.ckpt on improvement",
          "[pipelines][integration][checkpointing]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  const auto r = train(dir / "train.yaml", kShortEpochs, kCountWrites);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  CHECK(read_jsonl(run / "train.jsonl").size() == 6);
  CHECK(writes_of(r, "last.ckpt") == 2);  // after the validations of epochs 3 and 6; the end is epoch 6's
  const int best_writes = writes_of(r, "best.ckpt");
  CHECK(best_writes >= 1);
  CHECK(best_writes <= 2);
  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  CHECK(last.step == 6);
  CHECK(last.epoch == 6);
  CHECK(checkpoint_files(run) == std::vector<std::string>{"best.ckpt", "last.ckpt"});
  // best.ckpt holds the best validation, with every resume entry (it is last.ckpt's bytes when
  // both were written together).
  const auto best = oml::io::load_checkpoint(run / "checkpoints" / "best.ckpt");
  check_same_metrics(best_metrics(run), best.metrics);
  CHECK(best.resume.has_value());
}

TEST_CASE("every_n_epochs, every_n_train_steps and train_time_interval write last.ckpt when Lightning would",
          "[pipelines][integration][checkpointing]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  SECTION("every_n_epochs: 2 — after epochs 2, 4, 6") {
    const auto r = train(dir / "train.yaml", kShortEpochs + " --set every_n_epochs=2", kCountWrites);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(writes_of(r, "last.ckpt") == 3);
  }
  SECTION("every_n_train_steps: 4 — after steps 4 and 8 (mid-epoch) and 12 (the last epoch's end)") {
    // 2 epochs x 3 batches = 6 steps would not reach 8: 4 epochs.
    const auto r = train(dir / "train.yaml",
                         "--set max_epochs=4 --set valid_period=4 --set every_n_train_steps=4", kCountWrites);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // Step 12 ends an epoch: its last.ckpt is written after that epoch's validation, once.
    CHECK(writes_of(r, "last.ckpt") == 3);
    CHECK(oml::io::load_checkpoint(dir / "logs" / "run" / "checkpoints" / "last.ckpt").step == 12);
  }
  SECTION("train_time_interval: any step ends a microsecond-long interval") {
    const auto r =
        train(dir / "train.yaml", kShortEpochs + " --set train_time_interval.microseconds=1", kCountWrites);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // Due after every step, each the last of its one-batch epoch: written at each epoch's end.
    CHECK(writes_of(r, "last.ckpt") == 6);
  }
  SECTION("save_last: false — no last.ckpt at all, best.ckpt as before") {
    const auto r = train(dir / "train.yaml", kShortEpochs + " --set save_last=false", kCountWrites);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(writes_of(r, "last.ckpt") == 0);
    CHECK(checkpoint_files(dir / "logs" / "run") == std::vector<std::string>{"best.ckpt"});
  }
}

TEST_CASE("save_top_k keeps the k best under Lightning's names, best.ckpt the best of them, across a resume",
          "[pipelines][integration][checkpointing]") {
  TempDir dir;
  // Five epochs, each validated (the fixture's config trains two).
  const auto five_epochs = [](std::string config) {
    const std::string two = "max_epochs: 2\n";
    const std::size_t at = config.find(two);
    REQUIRE(at != std::string::npos);
    return config.replace(at, two.size(), "max_epochs: 5\n") + "save_top_k: 2\n";
  };
  write_file(dir / "full.yaml", five_epochs(train_config(dir / "full")));
  write_file(dir / "part.yaml", five_epochs(train_config(dir / "part")));
  // One uninterrupted run, one stopped after 3 epochs and resumed: the same files, the same ranking.
  const auto full = train(dir / "full.yaml");
  INFO(full.err);
  REQUIRE(full.exit_code == 0);
  REQUIRE(train(dir / "part.yaml", "--set max_epochs=3").exit_code == 0);
  const fs::path part = dir / "part" / "run";
  const auto resumed =
      train(dir / "part.yaml", "--resume " + quote((part / "checkpoints" / "last.ckpt").string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);

  const fs::path run = dir / "full" / "run";
  // Each validation's checkpoint name (Lightning's: the 0-based epoch, the step) and its cmc@1.
  std::map<std::string, double> validated;
  for (const auto& record : read_jsonl(run / "metrics.jsonl")) {
    const int64_t epoch = record.at("epoch"), step = record.at("step");
    validated["epoch=" + std::to_string(epoch) + "-step=" + std::to_string(step) + ".ckpt"] =
        record.at("metrics").at("OVERALL/cmc/1").get<double>();
  }
  REQUIRE(validated.size() == 5);
  std::vector<double> values;
  for (const auto& kv : validated) values.push_back(kv.second);
  std::sort(values.rbegin(), values.rend());
  // Kept: best.ckpt, last.ckpt and two of the validations' files, which hold the two best values.
  const std::vector<std::string> files = checkpoint_files(run);
  CHECK(checkpoint_files(part) == files);
  REQUIRE(files.size() == 4);
  std::vector<double> kept;
  int best_links = 0;
  for (const std::string& name : files) {
    if (name == "best.ckpt" || name == "last.ckpt") continue;
    REQUIRE(validated.count(name) == 1);
    kept.push_back(validated.at(name));
    if (fs::equivalent(run / "checkpoints" / "best.ckpt", run / "checkpoints" / name)) {
      ++best_links;
      CHECK(validated.at(name) == values[0]);  // best.ckpt is the best one's file, not a copy
    }
  }
  CHECK(best_links == 1);
  std::sort(kept.rbegin(), kept.rend());
  CHECK(kept == std::vector<double>{values[0], values[1]});
  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  REQUIRE(last.resume.has_value());
  CHECK(last.resume->best_k_models.size() == 2);
  CHECK(last.metrics.at("best/OVERALL/cmc/1") == Approx(values[0]));
}

TEST_CASE("A run killed after a mid-epoch checkpoint resumes from it exactly",
          "[pipelines][integration][checkpointing][resume]") {
  TempDir dir;
  // every_n_train_steps: 2 over epochs of 3 batches: last.ckpt after step 2 is inside epoch 1.
  // Each write pauses 1 s before its rename; the second pause means the first write is in place.
  write_file(dir / "full.yaml", train_config(dir / "full", "every_n_train_steps: 2\n"));
  write_file(dir / "part.yaml", train_config(dir / "part", "every_n_train_steps: 2\n"));
  REQUIRE(train(dir / "full.yaml").exit_code == 0);
  const fs::path err = dir / "err";
  const auto killed =
      run("env OML_FAILPOINTS=before_rename:last.ckpt=pause:1 " + quote(command_path("oml-train")) +
          " --progress quiet --config " + quote((dir / "part.yaml").string()) + " 2>" + quote(err.string()) +
          " & pid=$!; for i in $(seq 1200); do [ \"$(grep -c failpoint " + quote(err.string()) +
          ")\" -ge 2 ] && break; sleep 0.05; done; kill -9 $pid; wait $pid");
  CHECK(killed.exit_code == 128 + 9);
  const fs::path last = dir / "part" / "run" / "checkpoints" / "last.ckpt";
  const auto checkpoint = oml::io::load_checkpoint(last);
  REQUIRE(checkpoint.resume.has_value());
  CHECK(checkpoint.step == 2);
  CHECK(checkpoint.resume->sampler_epoch == 0);
  CHECK(checkpoint.resume->sampler_batch == 2);

  // A grid a killed process was writing (its pid is no live process's): in a folder of its own.
  const fs::path grid = dir / "part" / "run" / "images" / "epoch_000" / "worst_cmc_1.png.tmp-999999-7";
  write_file(grid, "half a png");

  const auto resumed = train(dir / "part.yaml", "--resume " + quote(last.string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err, Contains("removed 2 temporary file(s) of an earlier, killed process"));
  CHECK_FALSE(fs::exists(grid));
  check_same_training_log(dir / "full" / "run" / "train.jsonl", dir / "part" / "run" / "train.jsonl", "step");
  check_same_metrics(read_jsonl(dir / "full" / "run" / "metrics.jsonl")
                         .back()
                         .at("metrics")
                         .get<std::map<std::string, double>>(),
                     read_jsonl(dir / "part" / "run" / "metrics.jsonl")
                         .back()
                         .at("metrics")
                         .get<std::map<std::string, double>>());
}

TEST_CASE("A validation is recorded before the checkpoint after it, so a kill between them loses no record",
          "[pipelines][integration][checkpointing][resume]") {
  TempDir dir;
  // Three validated epochs, last.ckpt after each: killed while the second epoch's last.ckpt
  // waits before its rename, the run has already recorded that epoch's validation.
  write_file(dir / "full.yaml", train_config(dir / "full", "every_n_epochs: 1\n"));
  write_file(dir / "part.yaml", train_config(dir / "part", "every_n_epochs: 1\n"));
  REQUIRE(train(dir / "full.yaml", "--set max_epochs=3").exit_code == 0);
  const fs::path err = dir / "err";
  const fs::path metrics = dir / "part" / "run" / "metrics.jsonl";
  const auto killed =
      run("env OML_FAILPOINTS=before_rename:last.ckpt=pause:2 " + quote(command_path("oml-train")) +
          " --progress quiet --set max_epochs=3 --config " + quote((dir / "part.yaml").string()) + " 2>" +
          quote(err.string()) + " & pid=$!; for i in $(seq 1200); do [ \"$(grep -c failpoint " +
          quote(err.string()) + ")\" -ge 2 ] && break; sleep 0.05; done; wc -l < " + quote(metrics.string()) +
          " > " + quote((dir / "records").string()) + "; kill -9 $pid; wait $pid");
  CHECK(killed.exit_code == 128 + 9);
  CHECK(read_file(dir / "records") == "2\n");  // epoch 2's record is in place while its last.ckpt is not
  const fs::path last = dir / "part" / "run" / "checkpoints" / "last.ckpt";
  REQUIRE(oml::io::load_checkpoint(last).epoch == 1);  // epoch 1's: epoch 2's was never renamed

  const auto resumed = train(dir / "part.yaml", "--set max_epochs=3 --resume " + quote(last.string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const auto full = read_jsonl(dir / "full" / "run" / "metrics.jsonl");
  const auto part = read_jsonl(metrics);
  REQUIRE(part.size() == full.size());  // each validation once: epoch 2's cut back, then recorded again
  for (std::size_t i = 0; i < full.size(); ++i) {
    CHECK(part[i].at("step") == full[i].at("step"));
    check_same_metrics(full[i].at("metrics").get<std::map<std::string, double>>(),
                       part[i].at("metrics").get<std::map<std::string, double>>());
  }
}

TEST_CASE("A checkpoint write that fails stops training with the file's name and leaves no temporary",
          "[pipelines][integration][checkpointing]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs", "every_n_train_steps: 2\n"));
  // The failpoint fails every write of last.ckpt, the first (after step 2) included.
  const auto r =
      train(dir / "train.yaml", "--set max_epochs=4", "env OML_FAILPOINTS=before_rename:last.ckpt=fail ");
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const fs::path checkpoints = dir / "logs" / "run" / "checkpoints";
  CHECK_THAT(r.err, Contains("writing checkpoint '" + (checkpoints / "last.ckpt").string() + "' failed") &&
                        Contains("failpoint before_rename:last.ckpt: failed") &&
                        Contains("training stopped"));
  // It stopped at the next step, long before the 12 steps of 4 epochs.
  CHECK(read_jsonl(dir / "logs" / "run" / "train.jsonl").size() <= 4);
  for (const auto& entry : fs::directory_iterator(checkpoints)) {
    INFO(entry.path());
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
  }
}

}  // namespace checkpointing_tests
