// `memory_format: channels_last` (docs/training.md#memory-format) through oml-train and
// oml-validate: the same training as NCHW up to the convolutions' rounding, checkpoints in
// PyTorch's NCHW layout, an exact resume, two ranks, and a bad value named.
#include <nlohmann/json.hpp>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "oml/optim/multi_tensor.h"
#include "support/support.h"

namespace memory_format_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

CommandResult command(const std::string& name, const fs::path& config, const std::string& args = "") {
  return run(quote(command_path(name)) + " --progress quiet --config " + quote(config.string()) + " " + args,
             600);
}

// The fixture's run with fused Adam (whose kernels want a parameter, its gradient and its
// moments laid out alike; foreach on LibTorch 1.13, which has none) and `extra`.
std::string config(const fs::path& logs, const std::string& extra = "") {
  std::string yaml = train_config(logs, extra);
  const std::string adam = "{name: adam, args: {lr: 0.001}}";
  const std::size_t at = yaml.find(adam);
  REQUIRE(at != std::string::npos);
  const std::string kernel = oml::optim::fused_kernels_available() ? "fused" : "foreach";
  return yaml.replace(at, adam.size(), "{name: adam, args: {lr: 0.001, " + kernel + ": true}}");
}

// The losses of two runs of the same batches, one in each layout. oneDNN's NHWC and NCHW
// convolutions add in different orders: the first step agrees to rounding (1e-5 here), and then
// hard mining amplifies it, as any change of kernel would — a near-tie between two negatives
// picks the other one — so the runs drift apart by a few percent in six steps (with Adam or SGD).
void check_close_losses(const fs::path& a, const fs::path& b) {
  const auto first = read_jsonl(a / "train.jsonl");
  const auto second = read_jsonl(b / "train.jsonl");
  REQUIRE(first.size() == second.size());
  REQUIRE_FALSE(first.empty());
  for (std::size_t i = 0; i < first.size(); ++i) {
    INFO("step " << i + 1);
    const double tolerance = i == 0 ? 1e-4 : 0.1;
    CHECK(second[i].at("loss").get<double>() == Approx(first[i].at("loss").get<double>()).epsilon(tolerance));
  }
}

}  // namespace

TEST_CASE("memory_format: channels_last trains as NCHW does, writes NCHW checkpoints and resumes exactly",
          "[pipelines][integration][memory_format]") {
  TempDir dir;
  write_file(dir / "nchw.yaml", config(dir / "nchw"));
  write_file(dir / "last.yaml", config(dir / "last", "memory_format: channels_last\n"));
  write_file(dir / "part.yaml", config(dir / "part", "memory_format: channels_last\n"));
  const auto nchw = command("oml-train", dir / "nchw.yaml");
  const auto last = command("oml-train", dir / "last.yaml");
  INFO(nchw.err << last.err);
  REQUIRE(nchw.exit_code == 0);
  REQUIRE(last.exit_code == 0);
  check_close_losses(dir / "nchw" / "run", dir / "last" / "run");
  const auto metrics_nchw = best_metrics(dir / "nchw" / "run");
  const auto metrics_last = best_metrics(dir / "last" / "run");
  CHECK(metrics_last.at("OVERALL/cmc/1") == Approx(metrics_nchw.at("OVERALL/cmc/1")).margin(0.1));

  // The checkpoint holds the weights in PyTorch's default layout: torch.load gives contiguous
  // tensors, whatever the layout a later run chooses.
  const fs::path checkpoint = dir / "last" / "run" / "checkpoints" / "last.ckpt";
  const auto saved = oml::io::load_checkpoint(checkpoint);
  int conv_weights = 0;
  for (const auto& [name, tensor] : saved.state_dict) {
    INFO(name);
    CHECK(tensor.is_contiguous());
    conv_weights += tensor.dim() == 4;
  }
  CHECK(conv_weights > 0);

  // Stopped after one epoch and resumed: the uninterrupted run's records, step for step.
  REQUIRE(command("oml-train", dir / "part.yaml", "--set max_epochs=1").exit_code == 0);
  const fs::path part_checkpoint = dir / "part" / "run" / "checkpoints" / "last.ckpt";
  const auto resumed = command("oml-train", dir / "part.yaml", "--resume " + quote(part_checkpoint.string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  check_same_training_log(dir / "last" / "run" / "train.jsonl", dir / "part" / "run" / "train.jsonl", "step");

  // oml-validate in either layout measures what the run's last validation measured.
  for (const std::string layout : {"contiguous", "channels_last"}) {
    INFO(layout);
    write_file(dir / ("validate_" + layout + ".yaml"),
               validate_config(dir / ("validate_" + layout), checkpoint) + "memory_format: " + layout + "\n");
    const auto validated = command("oml-validate", dir / ("validate_" + layout + ".yaml"));
    INFO(validated.err);
    REQUIRE(validated.exit_code == 0);
    const auto measured = metrics_json(dir / ("validate_" + layout) / "validation" / "metrics.json");
    const auto trained = read_jsonl(dir / "last" / "run" / "metrics.jsonl")
                             .back()
                             .at("metrics")
                             .get<std::map<std::string, double>>();
    CHECK(measured.at("OVERALL/cmc/1") == Approx(trained.at("OVERALL/cmc/1")).margin(1e-6));
  }
}

TEST_CASE("memory_format: channels_last under DDP trains as NCHW does on two ranks",
          "[pipelines][integration][memory_format][ddp]") {
  TempDir dir;
  write_file(dir / "nchw.yaml", config(dir / "nchw"));
  write_file(dir / "last.yaml", config(dir / "last", "memory_format: channels_last\n"));
  const auto nchw = command("oml-train", dir / "nchw.yaml", "--nproc-per-node 2");
  const auto last = command("oml-train", dir / "last.yaml", "--nproc-per-node 2");
  INFO(nchw.err << last.err);
  REQUIRE(nchw.exit_code == 0);
  REQUIRE(last.exit_code == 0);
  check_close_losses(dir / "nchw" / "run", dir / "last" / "run");
}

TEST_CASE("A memory_format that is neither contiguous nor channels_last is exit 2 naming the key",
          "[pipelines][integration][memory_format][config]") {
  TempDir dir;
  write_file(dir / "train.yaml", config(dir / "logs", "memory_format: nhwc\n"));
  const auto r = command("oml-train", dir / "train.yaml");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("memory_format"));
  CHECK_THAT(r.err, Contains("contiguous, channels_last"));
  CHECK_THAT(r.err, Contains("nhwc"));
  CHECK_FALSE(fs::exists(dir / "logs"));
}

}  // namespace memory_format_tests
