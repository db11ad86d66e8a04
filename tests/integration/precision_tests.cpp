// precision: bf16 end to end on the CPU: training, validation and prediction run under bfloat16
// autocast, while checkpoints and embeddings.npy stay float32.
#include <torch/torch.h>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "oml/io/npy.h"
#include "support/support.h"

namespace precision_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {
// Row-wise cosine similarity of two [N, D] matrices.
at::Tensor row_cosine(const at::Tensor& a, const at::Tensor& b) {
  return (a * b).sum(1) / (a.norm(2, 1) * b.norm(2, 1)).clamp_min(1e-12);
}
}  // namespace

TEST_CASE("precision bf16 trains, validates and predicts in bfloat16 with float32 checkpoints and embeddings",
          "[pipelines][integration][precision]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs", "precision: bf16-mixed\n"));
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  CHECK_THAT(train.out + train.err, Contains("precision bf16: bfloat16 autocast"));
  const fs::path run = dir / "logs" / "run";
  REQUIRE(read_jsonl(run / "train.jsonl").size() == 6);

  // Master weights (and BatchNorm statistics) are float32 in the checkpoint; so is the optimizer.
  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  REQUIRE_FALSE(last.state_dict.empty());
  for (const auto& [name, tensor] : last.state_dict) {
    INFO(name);
    if (tensor.is_floating_point()) CHECK(tensor.scalar_type() == torch::kFloat);
  }
  CHECK_THAT(last.config, Contains("precision: bf16-mixed"));

  // oml-validate under the same precision reproduces what training's bf16 validation logged.
  const std::string validate_yaml = validate_config(dir / "logs", run / "checkpoints" / "best.ckpt");
  write_file(dir / "validate.yaml", validate_yaml + "precision: bf16\n");
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.err);
  REQUIRE(validate.exit_code == 0);
  check_same_metrics(
      best_metrics(run),
      read_json(dir / "logs" / "validation" / "metrics.json").get<std::map<std::string, double>>());

  // oml-predict in bf16 and in fp32: both write float32 ('<f4') embeddings; bf16's are the same
  // directions to bfloat16's ~3 digits, but not the same bits (the forward really ran in bf16).
  auto predict = [&](const std::string& precision, const std::string& out) {
    const auto result =
        run_oml("oml-predict",
                "--config " + quote((dir / "validate.yaml").string()) + " --set precision=" + precision +
                    " --set save_dir=" + quote((dir / out).string()) + " --set transforms_predict.name=norm");
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    CHECK_THAT(read_file(dir / out / "embeddings.npy").substr(0, 64), Contains("'descr': '<f4'"));
    const at::Tensor embeddings = oml::io::read_npy(dir / out / "embeddings.npy");
    CHECK(embeddings.scalar_type() == torch::kFloat);
    return embeddings;
  };
  const at::Tensor bf16 = predict("bf16", "pred_bf16");
  const at::Tensor fp32 = predict("32", "pred_32");
  REQUIRE(bf16.sizes() == fp32.sizes());
  CHECK_FALSE(torch::equal(bf16, fp32));
  const at::Tensor cosine = row_cosine(bf16, fp32);
  CHECK(cosine.min().item<double>() > 0.99);
  CHECK(cosine.mean().item<double>() > 0.999);

  // float16 needs a GPU: on this CPU build it is a config error at the key, naming bf16.
  const auto fp16 = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) +
                                             " --set precision=16 --set run_name=fp16");
  CHECK(fp16.exit_code == 2);
  CHECK_THAT(fp16.err, Contains("precision") && Contains("use precision: bf16"));
  CHECK_FALSE(fs::exists(dir / "logs" / "fp16"));
  const auto automatic = run_oml(
      "oml-predict",
      "--config " + quote((dir / "validate.yaml").string()) +
          " --set precision=16 --set accelerator=auto --set save_dir=" + quote((dir / "pred_16").string()));
  CHECK(automatic.exit_code == 2);
  CHECK_THAT(automatic.err, Contains("resolved to the CPU") && Contains("use precision: bf16"));
}

}  // namespace precision_tests
