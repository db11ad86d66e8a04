// The shipped benchmark recipes are OML's own configs with the lines docs/recipes.md lists
// changed: each trains (train_extractor.yaml) and validates (validate_extractor.yaml) end to
// end with zoo weights from a weights folder. The data is the Fashion-MNIST subset under the
// recipes' dataframe names with a category column; only sizes that would take minutes on CI
// are turned down on the command line (epochs, batch sizes, loader threads, and the image size:
// 64 px instead of 224 gives the ViT a 4 x 4 grid of patches, its position embedding
// interpolated as for any size), and InShop trains in fp32 (see below).
#include <torch/torch.h>

#include "oml/models/vit.h"
#include "oml/models/zoo.h"
#include "pipeline_fixtures.h"

namespace oml_recipes_tests {

using Catch::Matchers::Contains;
using oml::test::quote;
using oml::test::read_file;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

// The subset's dataframe with a category per label (label % 5: SOP and InShop sample whole
// categories), under both names the recipes read; the images are the subset's own.
fs::path dataset_with_categories(const fs::path& root) {
  const fs::path subset = oml::test::fashion_mnist_subset();
  fs::create_directories(root);
  fs::create_directory_symlink(subset / "images", root / "images");
  std::istringstream in(read_file(subset / "df.csv"));
  std::string line, out;
  std::getline(in, line);
  out = line + ",category\n";
  while (std::getline(in, line)) {
    const int64_t label = std::stoll(line.substr(0, line.find(',')));
    out += line + ",c" + std::to_string(label % 5) + "\n";
  }
  write_file(root / "df.csv", out);
  write_file(root / "df_with_bboxes.csv", out);
  return root;
}

// Random vits16 weights saved under the zoo file of each name, as a published state dict.
void write_zoo_files(const fs::path& dir, const std::vector<std::string>& names) {
  torch::manual_seed(11);
  oml::models::ViTOptions options;
  options.arch = "vits16";
  const oml::models::ViT model(options);
  for (const auto& name : names) {
    const auto entry = oml::models::find_zoo_entry(name);
    REQUIRE(entry);
    oml::test::write_state_dict_file(dir / entry->file, *model);
  }
}

std::vector<fs::path> files_named(const fs::path& root, const std::string& name) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().filename() == name) out.push_back(entry.path());
  }
  return out;
}

}  // namespace

TEST_CASE("OML's recipes as shipped train and validate with zoo weights", "[integration][recipes]") {
  TempDir dir;
  const fs::path data = dataset_with_categories(dir / "data");
  const fs::path weights = dir / "weights";
  fs::create_directories(weights);
  write_zoo_files(weights, {"vits16_dino", "vits16_cub", "vits16_cars", "vits16_sop", "vits16_inshop"});
  // Sizes only: the subset has 10 labels in 5 categories, and CI has 2 cores.
  const std::map<std::string, std::string> sampler = {
      {"cub", "--set sampler.args.n_labels=3 --set sampler.args.n_instances=2"},
      {"cars", "--set sampler.args.n_labels=3 --set sampler.args.n_instances=2"},
      {"sop",
       "--set sampler.args.n_categories=2 --set sampler.args.n_labels=2 --set sampler.args.n_instances=2"},
      // InShop's recipe is SOP's (category_balance, the hypvit transforms, bf16) on other data: it
      // trains in fp32 here, since a bf16 step emulated on a CPU without native bf16 (CI's) costs
      // ~3 fp32 ones and sop runs the recipe's bf16 path.
      {"inshop",
       "--set sampler.args.n_categories=2 --set sampler.args.n_labels=2 --set sampler.args.n_instances=2 "
       "--set precision=32"}};
  for (const auto& [recipe, sampler_sizes] : sampler) {
    INFO("configs/" << recipe);
    // The hypvit transforms take a crop_size too.
    const bool crop = recipe == "sop" || recipe == "inshop";
    const std::string common =
        " --set dataset_root=" + quote(data.string()) + " --set weights_dir=" + quote(weights.string()) +
        " --set num_workers=1 --set bs_val=32 --progress quiet" + " --set transforms_val.args.im_size=64" +
        (crop ? " --set transforms_val.args.crop_size=64" : "");
    const fs::path logs = dir / ("logs_" + recipe);
    const auto train =
        run_oml("oml-train",
                "--config " + quote(oml::test::source_path("configs/" + recipe + "/train_extractor.yaml")) +
                    common + " --set logs_root=" + quote(logs.string()) +
                    " --set max_epochs=1 --set transforms_train.args.im_size=64 " + sampler_sizes);
    INFO(train.err);
    REQUIRE(train.exit_code == 0);
    // OML's run folder: hydra.run.dir = ${logs_root}/${logs_folder}/, logs_folder = <now>_<postfix>.
    const auto metrics = files_named(logs, "metrics.jsonl");
    REQUIRE(metrics.size() == 1);
    CHECK_THAT(metrics[0].parent_path().filename().string(), Contains("_metric_learning"));
    CHECK_THAT(read_file(metrics[0]), Contains("OVERALL/cmc/1"));
    const auto best = files_named(logs, "best.ckpt");
    REQUIRE(best.size() == 1);

    // OML's fine-tuned zoo model, then our own checkpoint in its place.
    const std::string validate =
        "--config " + quote(oml::test::source_path("configs/" + recipe + "/validate_extractor.yaml")) +
        common + " --set logs_root=" + quote((dir / ("validation_" + recipe)).string());
    const auto zoo = run_oml("oml-validate", validate);
    INFO(zoo.err);
    CHECK(zoo.exit_code == 0);
    const auto own =
        run_oml("oml-validate", validate + " --set extractor.args.weights=" + quote(best[0].string()));
    INFO(own.err);
    CHECK(own.exit_code == 0);
    CHECK_THAT(own.out + own.err, Contains("cmc/1"));
  }
}

TEST_CASE("The Fashion-MNIST ViT example fine-tunes DINO weights on a CPU in bf16",
          "[integration][recipes]") {
  TempDir dir;
  const fs::path weights = dir / "weights";
  fs::create_directories(weights);
  write_zoo_files(weights, {"vits16_dino"});
  const auto r =
      run_oml("oml-train",
              "--config " + quote(oml::test::source_path("configs/fashion_mnist/train_vit.yaml")) +
                  " --set dataset_root=" + quote(oml::test::fashion_mnist_subset().string()) +
                  " --set weights_dir=" + quote(weights.string()) +
                  " --set logs_root=" + quote((dir / "logs").string()) +
                  " --set max_epochs=1 --set sampler.args.epoch_size=2 --set cache_size=0 --progress quiet");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto metrics = files_named(dir / "logs", "metrics.jsonl");
  REQUIRE(metrics.size() == 1);
  CHECK_THAT(read_file(metrics[0]), Contains("OVERALL/cmc/1"));
}

}  // namespace oml_recipes_tests
