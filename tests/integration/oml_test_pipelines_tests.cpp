// OML's own pipeline-test configs (tests/fixtures/oml_configs/test_pipelines: the 9 files of OML
// 4.0's tests/test_runs/test_pipelines/configs, byte for byte) run with oml-cpp as OML's
// test_pipelines.py runs them with its Python scripts beside the configs: each script sets
// dataset_root (predict.py: data_dir) to OML's mock dataset and nothing else, and Hydra's
// `job.chdir: True` runs each in its `hydra.run.dir` (`logs`, predict's `.`). Here the mock
// dataset is generated locally (tests/python/oml_mock_dataset.py: OML downloads its own), and the
// runs keep every other setting OML wrote: accelerator: cpu, devices (2 ranks for train,
// train_with_sequence, train_postprocessor, predict and validate2), epochs, batches, image sizes,
// models with random weights, loggers (offline).
//
// What OML's scripts do beyond the config, done the oml-cpp way:
// - train_with_bboxes.py registers a transform of its own, `custom_augmentations`; here a plugin
//   (tests/fixtures/custom_augmentations_plugin.cpp) registers it, loaded with --plugin.
// - validate.yaml loads `weights: checkpoints/best.ckpt`, the checkpoint train.yaml wrote, relative
//   to Hydra's run directory `logs` that OML changes into; oml-cpp does not change directory
//   (docs/configuration.md#coming-from-oml), so oml-validate runs from that directory.
// - validate.yaml's re-ranker loads OML's zoo weights resnet50_moco_v2: random weights in MoCo's
//   checkpoint form under the zoo's file name, in $OML_WEIGHTS_DIR (oml-cpp never downloads).
#include "oml/registry/plugin.h"
#include "pipeline_fixtures.h"
#include "shell/cli.h"
#include "shell/components.h"

namespace oml_test_pipelines_tests {

using Catch::Matchers::Contains;
using oml::test::command_path;
using oml::test::quote;
using oml::test::read_file;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

const char* const kFolder = "tests/fixtures/oml_configs/test_pipelines/";

// The key OML's script points at the mock dataset: predict.py sets data_dir, the others dataset_root.
std::string dataset_key(const std::string& config_text) {
  return config_text.find("\ndata_dir:") != std::string::npos ? "data_dir" : "dataset_root";
}

// OML's mock dataset, generated (the docstring of tests/python/oml_mock_dataset.py says how).
fs::path mock_dataset(const fs::path& root) {
  const auto r = oml::test::run(oml::test::python() + " " +
                                quote(oml::test::source_path("tests/python/oml_mock_dataset.py")) + " " +
                                quote(root.string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return root;
}

// Random resnet50_projector weights as MoCo v2's checkpoint holds them, under the file name OML's
// zoo gives resnet50_moco_v2 (tests/python/resnet_projector_reference.py writes them).
void moco_zoo_weights(const fs::path& weights) {
  const TempDir reference;
  const auto r = oml::test::run(oml::test::python() + " " +
                                quote(oml::test::source_path("tests/python/resnet_projector_reference.py")) +
                                " export " + quote(reference.path().string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  fs::create_directories(weights);
  fs::copy_file(reference / "moco.pth.tar", weights / "moco_v2_800ep_pretrain.pth.tar");
}

struct Fixture {
  TempDir dir;
  fs::path data = mock_dataset(dir / "mock_dataset");
  fs::path weights = dir / "weights";
  fs::path cwd = dir / "cwd";
  Fixture() { fs::create_directories(cwd); }
};

// One of OML's test configs as written, run by `command` from `cwd` with what OML's script sets:
// dataset_root (or predict's data_dir) to the mock dataset.
oml::test::CommandResult run_test_config(const std::string& command, const std::string& config,
                                         const fs::path& cwd, const Fixture& f,
                                         const std::string& extra = "") {
  const fs::path file = oml::test::source_path(kFolder + config);
  const std::string text = read_file(file);
  std::string line = "cd " + quote(cwd.string()) + " && OML_WEIGHTS_DIR=" + quote(f.weights.string()) + " " +
                     quote(command_path(command)) + " --config " + quote(file.string()) + " --set " +
                     dataset_key(text) + "=" + quote(f.data.string());
  // train_postprocessor.yaml caches embeddings in /tmp, as OML's test does; a path like the others,
  // pointed into the test's folder so that no run leaves files behind.
  if (text.find("\nembeddings_cache_dir:") != std::string::npos)
    line += " --set embeddings_cache_dir=" + quote((f.dir / "embeddings_cache").string());
  line += " " + extra + " --progress quiet";
  auto r = oml::test::run(line, 1800);
  INFO(config << "\n" << r.err);
  CHECK(r.exit_code == 0);
  return r;
}

// The training run in `run_dir` (the configs' hydra.run.dir, `logs`): validated after its last
// epoch on the config's checkpointing metric, with a best checkpoint.
void check_trained(const fs::path& run_dir, const std::string& checkpointing_metric) {
  const auto metrics = oml::test::read_jsonl(run_dir / "metrics.jsonl");
  REQUIRE_FALSE(metrics.empty());
  CHECK(metrics.back().at("epoch") == 1);  // max_epochs: 2
  CHECK(metrics.back().at("metrics").contains(checkpointing_metric));
  CHECK(fs::exists(run_dir / "checkpoints" / "best.ckpt"));
}

// Trains `config` as written in a fresh fixture and checks its run directory, `logs`, and the
// offline run its logger wrote there (`logger_folder`; "" for TensorBoard's event file).
void train_as_written(const std::string& config, const std::string& checkpointing_metric,
                      const std::string& logger_folder, const std::string& extra = "") {
  Fixture f;
  run_test_config("oml-train", config, f.cwd, f, extra);
  check_trained(f.cwd / "logs", checkpointing_metric);
  if (!logger_folder.empty()) CHECK(fs::exists(f.cwd / "logs" / logger_folder));
}

}  // namespace

// Every test config is read and its components parsed as the commands do before any data (seconds).
TEST_CASE("Every pipeline-test config of OML is accepted as written, with only the dataset path set",
          "[integration][oml_configs][oml_test_pipelines]") {
  oml::cli::register_builtins();
  // train_with_bboxes.yaml names a transform its test registers (OML's train_with_bboxes.py does
  // it in Python): loaded as `--plugin` loads it, before the configs are read. Invocation::plugins
  // alone is what the command line parsed, and load_config() does not load it.
  oml::load_plugin(OML_CUSTOM_AUGMENTATIONS_PLUGIN);
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(oml::test::source_path(kFolder))) {
    if (entry.path().extension() != ".yaml") continue;
    oml::cli::Invocation invocation;
    invocation.command = "oml-train";
    invocation.config_path = entry.path().string();
    invocation.overrides = {dataset_key(read_file(entry.path())) + "=/nonexistent/data"};
    INFO(entry.path().string());
    CHECK_NOTHROW(invocation.load_config());
    ++checked;
  }
  CHECK(checked == 9);
}

TEST_CASE("OML's pipeline test predict.yaml runs as written: 2 ranks embed the mock dataset's images",
          "[integration][oml_configs][oml_test_pipelines]") {
  Fixture f;
  // hydra.run.dir is save_dir, ".": the embeddings land where the command runs.
  run_test_config("oml-predict", "predict.yaml", f.cwd, f);
  CHECK(fs::exists(f.cwd / "embeddings.npy"));
}

TEST_CASE("OML's pipeline test validate2.yaml runs as written: 2 ranks, adaptive thresholding",
          "[integration][oml_configs][oml_test_pipelines]") {
  Fixture f;
  const auto r = run_test_config("oml-validate", "validate2.yaml", f.cwd, f);
  CHECK_THAT(r.err + r.out, Contains("OVERALL/cmc/1"));
}

// Its ReduceLROnPlateau monitors `triplet_loss_epoch`, the epoch mean of the training loss.
TEST_CASE("OML's pipeline test train_with_bboxes.yaml runs with its custom_augmentations from a plugin",
          "[integration][oml_configs][oml_test_pipelines]") {
  train_as_written("train_with_bboxes.yaml", "OVERALL/cmc/5", "wandb",
                   "--plugin " + quote(OML_CUSTOM_AUGMENTATIONS_PLUGIN));
}

TEST_CASE("OML's pipeline test train_with_categories.yaml runs as written (hard triplets, MLflow)",
          "[integration][oml_configs][oml_test_pipelines]") {
  train_as_written("train_with_categories.yaml", "OVERALL/cmc/1", "ml-runs");
}

TEST_CASE("OML's pipeline test train_arcface_with_categories.yaml runs as written (ArcFace, ClearML)",
          "[integration][oml_configs][oml_test_pipelines]") {
  train_as_written("train_arcface_with_categories.yaml", "OVERALL/fnmr@fmr/0.1", "clearml");
}

TEST_CASE("OML's pipeline test train_with_sequence.yaml runs as written (2 ranks, sequences, Neptune)",
          "[integration][oml_configs][oml_test_pipelines]") {
  train_as_written("train_with_sequence.yaml", "OVERALL/precision/5", ".neptune");
}

TEST_CASE("OML's pipeline test train_postprocessor.yaml runs as written (2 ranks, concat_siamese)",
          "[integration][oml_configs][oml_test_pipelines]") {
  train_as_written("train_postprocessor.yaml", "OVERALL/cmc/1", "");
}

// OML's test_train_and_validate: train.yaml (CLIP's ViT-B/16 at 224 px, 2 ranks), then
// validate.yaml on its checkpoint with a ResNet-50 re-ranker at 224 px.
TEST_CASE("OML's pipeline tests train.yaml, then validate.yaml on its checkpoint, run as written",
          "[integration][oml_configs][oml_test_pipelines][slow]") {
  Fixture f;
  run_test_config("oml-train", "train.yaml", f.cwd, f);
  check_trained(f.cwd / "logs", "OVERALL/precision/5");

  moco_zoo_weights(f.weights);
  // Hydra's run directory, where OML's validate.py resolves checkpoints/best.ckpt (see the top).
  const auto r = run_test_config("oml-validate", "validate.yaml", f.cwd / "logs", f);
  CHECK_THAT(r.err + r.out, Contains("OVERALL/cmc/1"));
}

}  // namespace oml_test_pipelines_tests
