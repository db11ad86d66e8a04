// OML's own pipeline configs (tests/fixtures/oml_configs: the 18 files OML ships, byte for byte)
// run with oml-cpp, changing only what OML's comments ask a user to change — dataset_root and the
// weights paths — plus accelerator: cpu and precision: bf16 (for precision: 16) on a machine
// without a GPU, and max_steps on the command line so that training takes a step, not days.
//
// One more change, for memory: OML sized the batches of seven configs for GPUs (120 to 600 ViT
// images of 224 px per step: 10 to 50 GB of activations to keep for the backward pass), more than
// this project's 24 GB CI machine holds next to a parallel test. Those runs pass a smaller
// sampler n_labels (or bs_train) on the command line — kSmallerBatch below — and nothing else;
// the GPU check runs all of them exactly as shipped (docs/benchmarks.md#gpu-check).
//
// The data is Fashion-MNIST regrouped to the shape OML's samplers ask for (up to 150 labels per
// batch, 3 to 5 categories of 30+ labels): each train label is 6 images of one class, its
// category the class; validation labels are 4 test images each (tests/python/oml_shaped_dataset.py). Weights
// are random ViT-S/16 weights under the zoo names the configs use, in a folder named by $OML_WEIGHTS_DIR
// (oml-cpp never downloads). Training runs every config's own batch size, image size and precision, so these
// cases take minutes on a CPU.
#include <torch/torch.h>

#include <regex>

#include "oml/models/vit.h"
#include "oml/models/vit_clip.h"
#include "oml/models/zoo.h"
#include "pipeline_fixtures.h"
#include "shell/cli.h"
#include "shell/components.h"

namespace oml_configs_tests {

using Catch::Matchers::Contains;
using oml::test::command_path;
using oml::test::quote;
using oml::test::read_file;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

// Fashion-MNIST regrouped as described above (tests/python/oml_shaped_dataset.py, which the GPU
// check uses too).
// `train_labels_per_class` (default 40) and `validation_labels_per_class` (default 5) thin the
// splits where no sampler needs all of them.
fs::path oml_shaped_dataset(const fs::path& root, int train_labels_per_class = 40,
                            int validation_labels_per_class = 5) {
  const fs::path subset = oml::test::fashion_mnist_subset(3000);
  const auto r = oml::test::run(
      oml::test::python() + " " + quote(oml::test::source_path("tests/python/oml_shaped_dataset.py")) + " " +
      quote(subset.string()) + " " + quote(root.string()) + " " + std::to_string(train_labels_per_class) +
      " " + std::to_string(validation_labels_per_class));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return root;
}

// The command-line batch changes for CI's memory (see the top of the file), by config file name.
const std::map<std::string, std::string> kSmallerBatch{
    {"train_cars.yaml", "--set sampler.args.n_labels=4"},             // 20 x 10 -> 4 x 10
    {"train_sop.yaml", "--set sampler.args.n_labels=2"},              // 3 x 32 x 6 -> 3 x 2 x 6
    {"train_inshop.yaml", "--set sampler.args.n_labels=2"},           // 5 x 30 x 4 -> 5 x 2 x 4
    {"train_inshop_with_mlp.yaml", "--set sampler.args.n_labels=2"},  // 3 x 20 x 6 -> 3 x 2 x 6
    {"extractor_train.yaml", "--set sampler.args.n_labels=10"},       // 150 x 4 -> 10 x 4
    {"postprocessor_train.yaml", "--set sampler.args.n_labels=5"},    // 30 x 4 pairs -> 5 x 4
    {"train_inshop_arcface.yaml", "--set bs_train=8"},                // ViT-B/16, 128 -> 8
};

// Random weights of CLIP's ViT-B/16 image tower under the zoo file of openai_vitb16_224.
void clip_zoo_weights(const fs::path& dir) {
  torch::manual_seed(6);
  oml::models::ViTClipOptions options;
  options.arch = "vitb16_224";
  const oml::models::ViTClip model(options);
  const auto entry = oml::models::find_zoo_entry("openai_vitb16_224");
  REQUIRE(entry);
  oml::test::write_state_dict_file(dir / entry->file, *model);
}

// Random ViT-S/16 weights under the zoo files of `names` (one file, linked under the others).
fs::path zoo_weights(const fs::path& dir, const std::vector<std::string>& names) {
  fs::create_directories(dir);
  torch::manual_seed(5);
  oml::models::ViTOptions options;
  options.arch = "vits16";
  const oml::models::ViT model(options);
  const fs::path file = dir / "vits16_random.pth";
  oml::test::write_state_dict_file(file, *model);
  for (const auto& name : names) {
    const auto entry = oml::models::find_zoo_entry(name);
    REQUIRE(entry);
    fs::create_symlink(file, dir / entry->file);
  }
  return file;
}

bool has_line(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern, std::regex::multiline));
}

// One OML config as shipped, run by `command` from `cwd` (its relative paths are the cwd's):
// dataset_root and accelerator set, precision 16 made bf16, training stopped after one step.
oml::test::CommandResult run_shipped(const std::string& command, const std::string& config,
                                     const fs::path& cwd, const fs::path& data, const fs::path& weights_dir,
                                     const std::string& extra = "") {
  const fs::path file = oml::test::source_path("tests/fixtures/oml_configs/" + config);
  const std::string text = read_file(file);
  std::string sets = " --set accelerator=cpu";
  if (has_line(text, "^precision: 16")) sets += " --set precision=bf16";
  if (has_line(text, "^dataset_root:")) sets += " --set dataset_root=" + quote(data.string());
  if (command == "oml-train") sets += " --set max_steps=1";
  if (const auto smaller = kSmallerBatch.find(file.filename().string()); smaller != kSmallerBatch.end())
    sets += " " + smaller->second;
  const std::string line = "cd " + quote(cwd.string()) +
                           " && OML_WEIGHTS_DIR=" + quote(weights_dir.string()) + " " +
                           quote(command_path(command)) + " --config " + quote(file.string()) + sets + " " +
                           extra + " --progress quiet";
  auto r = oml::test::run(line, 1800);
  INFO(config << "\n" << r.err);
  CHECK(r.exit_code == 0);
  return r;
}

// The one run directory below `logs` (OML's logs_root/logs_folder), holding a validation.
fs::path trained_run(const fs::path& logs) {
  std::vector<fs::path> runs;
  for (const auto& entry : fs::recursive_directory_iterator(logs))
    if (entry.path().filename() == "metrics.jsonl") runs.push_back(entry.path().parent_path());
  REQUIRE(runs.size() == 1);
  const auto metrics = oml::test::read_jsonl(runs[0] / "metrics.jsonl");
  REQUIRE_FALSE(metrics.empty());
  CHECK(metrics.back().at("metrics").contains("OVERALL/cmc/1"));
  CHECK(fs::exists(runs[0] / "checkpoints" / "best.ckpt"));
  return runs[0];
}

struct Fixture {
  explicit Fixture(int train_labels_per_class = 40, int validation_labels_per_class = 5)
      : data(oml_shaped_dataset(dir / "data_root", train_labels_per_class, validation_labels_per_class)) {
    init();
  }
  TempDir dir;
  fs::path data;
  fs::path weights = dir / "weights";
  fs::path cwd = dir / "cwd";

 private:
  void init() {
    zoo_weights(weights, {"vits16_dino", "vits16_cub", "vits16_cars", "vits16_sop", "vits16_inshop"});
    fs::create_directories(cwd);
    // predict_*.yaml read the images under data_dir: data/ (relative: the cwd's).
    fs::create_directories(cwd / "data");
    int n = 0;
    for (const auto& entry : fs::directory_iterator(data / "images" / "val")) {
      fs::create_symlink(entry.path(), cwd / "data" / entry.path().filename());
      if (++n == 12) break;
    }
  }
};

// train_*, val_*, predict_* of one benchmark: training writes an offline W&B run (OML's logger)
// and a validated checkpoint; validation and prediction load OML's zoo model by name.
// 2 validation labels a class (80 images): the configs' metrics all have their queries, and the
// ViT embeds 120 fewer 224 px images in each of the two validations.
void run_benchmark(const std::string& dataset, const std::string& short_name) {
  Fixture f(40, 2);
  const std::string folder = "pipelines/features_extraction/extractor_" + short_name + "/";
  run_shipped("oml-train", folder + "train_" + short_name + ".yaml", f.cwd, f.data, f.weights);
  const fs::path run = trained_run(f.cwd / "logs" / dataset);
  CHECK(fs::exists(run / "wandb"));

  const auto validated =
      run_shipped("oml-validate", folder + "val_" + short_name + ".yaml", f.cwd, f.data, f.weights);
  CHECK_THAT(validated.err + validated.out, Contains("OVERALL/cmc/1"));

  run_shipped("oml-predict", folder + "predict_" + short_name + ".yaml", f.cwd, f.data, f.weights);
  CHECK(fs::exists(f.cwd / "embeddings.npy"));
}

}  // namespace

// Every config OML ships is accepted by the command that runs it: keys, component names and
// args, metrics and the retrieval backend, as each command reads them before any data (seconds
// for all 18). The cases below run them whole; all but CUB are tagged [slow] (minutes each on 2
// cores: ViTs at 224 px, 2-rank runs), run by `scripts/test.sh --slow` and the GPU check.
TEST_CASE("Every config OML ships is accepted as shipped, with only the paths and the CPU's precision set",
          "[integration][oml_configs]") {
  oml::cli::register_builtins();
  int checked = 0;
  const fs::path root = oml::test::source_path("tests/fixtures/oml_configs/pipelines");
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string text = read_file(entry.path());
    oml::cli::Invocation invocation;
    invocation.command = "oml-train";
    invocation.config_path = entry.path().string();
    invocation.overrides = {"accelerator=cpu"};
    if (has_line(text, "^precision: 16")) invocation.overrides.push_back("precision=bf16");
    if (has_line(text, "^dataset_root:")) invocation.overrides.push_back("dataset_root=/nonexistent/data");
    INFO(entry.path().string());
    CHECK_NOTHROW(invocation.load_config());
    ++checked;
  }
  CHECK(checked == 18);
}

TEST_CASE("OML's CUB configs run as shipped: train_cub, val_cub, predict_cub", "[integration][oml_configs]") {
  run_benchmark("CUB_200_2011", "cub");
}

TEST_CASE("OML's CARS configs run as shipped: train_cars, val_cars, predict_cars",
          "[integration][oml_configs][slow]") {
  run_benchmark("CARS196", "cars");
}

TEST_CASE("OML's SOP configs run as shipped: train_sop (2 ranks, 16 -> bf16), val_sop, predict_sop",
          "[integration][oml_configs][slow]") {
  run_benchmark("Stanford_Online_Products", "sop");
}

TEST_CASE(
    "OML's InShop configs run as shipped: train_inshop (2 ranks, 16 -> bf16), val_inshop, predict_inshop",
    "[integration][oml_configs][slow]") {
  run_benchmark("DeepFashion_InShop", "inshop");
}

// OML's pairwise folder is a chain: extractor_train -> extractor_validate (weights) ->
// postprocessor_train (extractor_weights) -> postprocessor_validate (extractor_weights +
// postprocessor_weights). Two cases, each within CI's 10 minutes: the re-ranker's runs embed the
// whole dataframe with the ViT (224 px on 2 CPU cores) and score top_n = 5 pairs of every query
// with concat_siamese (a ViT on two images), so its half starts from the random ViT-S/16 weights
// the fixture writes, a state dict as good a baseline extractor as a checkpoint. 2 train labels a
// class instead of 40, and 2 validation labels instead of 5 (1 for the re-ranker: 40 queries, 200
// pairs a run); every sampler here (10 x 4, 5 x 4 pairs on the command line) still finds its labels.
const char* const kPairwiseFolder = "pipelines/postprocessing/pairwise_postprocessing/";

TEST_CASE(
    "OML's pairwise extractor configs run as shipped: extractor_train, then extractor_validate on its "
    "checkpoint",
    "[integration][oml_configs][pairwise][slow]") {
  Fixture f(2, 2);
  const std::string folder = kPairwiseFolder;
  run_shipped("oml-train", folder + "extractor_train.yaml", f.cwd, f.data, f.weights,
              "--set logs_root=" + quote((f.dir / "extractor_logs").string()));
  const fs::path extractor = trained_run(f.dir / "extractor_logs") / "checkpoints" / "best.ckpt";

  // OML's extractor_validate.yaml names the extractor in `weights:` ("specify path to an extractor").
  const auto validated = run_shipped("oml-validate", folder + "extractor_validate.yaml", f.cwd, f.data,
                                     f.weights, "--set weights=" + quote(extractor.string()));
  CHECK_THAT(validated.err + validated.out, Contains("OVERALL/cmc/1"));
}

TEST_CASE(
    "OML's pairwise re-ranker configs run as shipped: postprocessor_train, then postprocessor_validate on "
    "its checkpoint",
    "[integration][oml_configs][pairwise][slow]") {
  Fixture f(2, 1);
  const std::string folder = kPairwiseFolder;
  const std::string extractor_weights =
      " --set extractor_weights=" + quote((f.weights / "vits16_random.pth").string());
  const auto trained =
      run_shipped("oml-train", folder + "postprocessor_train.yaml", f.cwd, f.data, f.weights,
                  extractor_weights + " --set logs_root=" + quote((f.dir / "postprocessor_logs").string()));
  // use_fp16 on a CPU: bfloat16, said once.
  CHECK_THAT(trained.err, Contains("use_fp16 scores in bfloat16"));
  const fs::path postprocessor = trained_run(f.dir / "postprocessor_logs") / "checkpoints" / "best.ckpt";

  const auto reranked =
      run_shipped("oml-validate", folder + "postprocessor_validate.yaml", f.cwd, f.data, f.weights,
                  extractor_weights + " --set postprocessor_weights=" + quote(postprocessor.string()));
  CHECK_THAT(reranked.err + reranked.out, Contains("OVERALL/cmc/1"));
}

TEST_CASE("OML's experimental InShop config with an MLP head runs as shipped (2 ranks)",
          "[integration][oml_configs][slow]") {
  Fixture f;
  run_shipped("oml-train", "pipelines/features_extraction/configs_experimental/train_inshop_with_mlp.yaml",
              f.cwd, f.data, f.weights);
  trained_run(f.cwd / "logs" / "DeepFashion_InShop");
}

TEST_CASE("OML's experimental InShop config with CLIP's ViT-B/16 and ArcFace runs as shipped",
          "[integration][oml_configs][slow]") {
  Fixture f;
  clip_zoo_weights(f.weights);
  const auto r =
      run_shipped("oml-train", "pipelines/features_extraction/configs_experimental/train_inshop_arcface.yaml",
                  f.cwd, f.data, f.weights);
  // show_dataset_warnings: False is read (and the dataframe has nothing to warn about).
  CHECK_THAT(r.err, !Contains("unknown key"));
  trained_run(f.cwd / "logs" / "DeepFashion_InShop");
}

TEST_CASE("show_dataset_warnings: false silences the dataframe's warnings, as OML's verbose=False",
          "[integration][oml_configs]") {
  TempDir dir;
  // Label 0 in two categories: rule 9's warning.
  const fs::path subset = oml::test::fashion_mnist_subset();
  fs::create_directories(dir / "data");
  fs::create_directory_symlink(subset / "images", dir / "data" / "images");
  std::istringstream in(read_file(subset / "df.csv"));
  std::string line, csv;
  std::getline(in, line);
  csv = line + ",category\n";
  for (int i = 0; std::getline(in, line); ++i) csv += line + (i == 0 ? ",odd\n" : ",c\n");
  write_file(dir / "data" / "df.csv", csv);
  write_file(dir / "train.yaml", oml::test::train_config(dir / "logs"));
  const auto run = [&](const std::string& name, const std::string& sets) {
    return oml::test::run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) +
                                               " --set dataset_root=" + quote((dir / "data").string()) +
                                               " --set run_name=" + name + " --set max_epochs=1" + sets +
                                               " --progress quiet");
  };
  const auto warned = run("warned", "");
  INFO(warned.err);
  CHECK(warned.exit_code == 0);
  CHECK_THAT(warned.err, Contains("has several categories"));
  const auto quiet = run("quiet", " --set show_dataset_warnings=false");
  INFO(quiet.err);
  CHECK(quiet.exit_code == 0);
  CHECK_THAT(quiet.err, !Contains("has several categories"));
}

}  // namespace oml_configs_tests
