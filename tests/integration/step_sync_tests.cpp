// How the Trainer reads a step's loss and logs (docs/training.md#no-step-waits-for-the-gpu): at
// once on the CPU, one step late on CUDA, where a read would make every step wait for the GPU.
// OML_DEFER_STEP_READS=1 takes CUDA's way on the CPU, so that the deferred path's records, its
// average over the ranks and its stop on a non-finite loss are checked here, without a GPU. And
// `cuda_graphs: true`, which a CPU run declines with a warning.
#include <torch/torch.h>

#include "integration/pipeline_fixtures.h"
#include "support/support.h"

namespace step_sync_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// oml-train on `yaml` with OML_DEFER_STEP_READS=`defer`.
CommandResult train(const TempDir& tmp, const std::string& name, const std::string& defer,
                    const std::string& yaml, const std::string& args = "") {
  const fs::path config = tmp / (name + ".yaml");
  write_file(config, yaml);
  return run("OML_DEFER_STEP_READS=" + defer + " " + quote((fs::path(OML_BIN_DIR) / "oml-train").string()) +
                 " --config " + quote(config.string()) + " --progress quiet " + args,
             600);
}

// train.jsonl's records without their one timing field.
std::vector<nlohmann::json> records(const fs::path& run) {
  auto out = read_jsonl(run / "train.jsonl");
  for (auto& record : out) record.erase("samples_per_s");
  return out;
}

// "epoch 1, step 2" of "the loss became NaN at epoch 1, step 2; ...".
std::string where_the_loss_failed(const std::string& err) {
  const std::string marker = " at epoch ";
  const auto from = err.find("the loss became");
  REQUIRE(from != std::string::npos);
  const auto at = err.find(marker, from);
  const auto end = err.find(';', at);
  REQUIRE(at != std::string::npos);
  REQUIRE(end != std::string::npos);
  return err.substr(at + 4, end - at - 4);
}

}  // namespace

TEST_CASE("A step's loss and logs read one step late give the records read at once, also under DDP",
          "[pipelines][integration][step_sync]") {
  TempDir tmp;
  // Two batches per step (two losses to average) and the triplet miner's four log values.
  for (const std::string& args : {std::string(), std::string("--nproc-per-node 2")}) {
    INFO(args);
    const std::string extra = "accumulate_grad_batches: 2\n";
    const fs::path at_once = tmp / ("at_once" + std::to_string(args.size())),
                   deferred = tmp / ("deferred" + std::to_string(args.size()));
    const auto a = train(tmp, at_once.filename().string(), "0", train_config(at_once, extra), args);
    const auto b = train(tmp, deferred.filename().string(), "1", train_config(deferred, extra), args);
    INFO(a.err << b.err);
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    const auto expected = records(at_once / "run");
    REQUIRE_FALSE(expected.empty());
    if (args.empty()) CHECK(expected.size() == 4);  // 2 epochs of 3 batches: steps after batches 2 and 3
    CHECK(expected.front().count("active_tri") == 1);
    CHECK(records(deferred / "run") == expected);
    CHECK(read_jsonl(deferred / "run" / "metrics.jsonl") == read_jsonl(at_once / "run" / "metrics.jsonl"));
  }
}

TEST_CASE(
    "A non-finite loss read one step late stops the run at that step, before validation and checkpoints",
    "[pipelines][integration][step_sync]") {
  TempDir tmp;
  const std::string diverging = "--set 'optimizer={name: sgd, args: {lr: 1.0e+30}}' --set max_epochs=3";
  const auto at_once = train(tmp, "at_once", "0", train_config(tmp / "at_once"), diverging);
  const auto deferred = train(tmp, "deferred", "1", train_config(tmp / "deferred"), diverging);
  INFO(at_once.err << deferred.err);
  REQUIRE(at_once.exit_code == 1);
  REQUIRE(deferred.exit_code == 1);
  CHECK_THAT(at_once.err, Contains("training stopped before applying that step"));
  CHECK_THAT(deferred.err, Contains("training stopped when the step's loss was read") &&
                               Contains("no validation and no checkpoint saw them"));
  // The same step is named, the same steps before it are logged, and nothing validated or saved it.
  CHECK(where_the_loss_failed(deferred.err) == where_the_loss_failed(at_once.err));
  CHECK(records(tmp / "deferred" / "run") == records(tmp / "at_once" / "run"));
  CHECK(read_jsonl(tmp / "deferred" / "run" / "metrics.jsonl") ==
        read_jsonl(tmp / "at_once" / "run" / "metrics.jsonl"));
  CHECK(fs::exists(tmp / "deferred" / "run" / "checkpoints" / "last.ckpt") ==
        fs::exists(tmp / "at_once" / "run" / "checkpoints" / "last.ckpt"));
}

TEST_CASE("OML_DEFER_STEP_READS other than 0 or 1 is exit 2 naming it",
          "[pipelines][integration][step_sync]") {
  TempDir tmp;
  const auto r = train(tmp, "bad", "yes", train_config(tmp / "bad"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("OML_DEFER_STEP_READS must be 1") && Contains("got 'yes'"));
}

TEST_CASE("cuda_graphs: true on the CPU says why nothing is captured and trains as without it",
          "[pipelines][integration][cuda_graphs]") {
  TempDir tmp;
  const auto plain = train(tmp, "plain", "1", train_config(tmp / "plain"));
  const auto graphs = train(tmp, "graphs", "1", train_config(tmp / "graphs", "cuda_graphs: true\n"));
  INFO(plain.err << graphs.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(graphs.exit_code == 0);
  CHECK_THAT(graphs.err, Contains("cuda_graphs: true, but CUDA graphs need a CUDA device, and this run "
                                  "computes on cpu: training steps run eagerly"));
  CHECK(records(tmp / "graphs" / "run") == records(tmp / "plain" / "run"));
  // A value that is not a boolean is the config's error, before anything runs.
  const auto bad = train(tmp, "bad", "1", train_config(tmp / "bad", "cuda_graphs: sometimes\n"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("cuda_graphs"));
}

}  // namespace step_sync_tests
