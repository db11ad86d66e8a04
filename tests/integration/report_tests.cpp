// Runs people can look at, end to end: oml-train writes TensorBoard events, worst-query grids
// and report.html; oml-validate --visualize draws grids; Chromium renders the report.
#include <torch/torch.h>
#include <sstream>

#include <regex>

#include "oml/data/image.h"
#include "oml/report/tensorboard_writer.h"
#include "support/support.h"

namespace report_tests {

using Catch::Matchers::Contains;
using oml::test::fashion_mnist_subset;
using oml::test::quote;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

std::string config(const fs::path& logs, const std::string& extra) {
  return "seed: 1\nnum_threads: 1\nnum_workers: 1\ndataset_root: " + fashion_mnist_subset().string() +
         "\nlogs_root: " + logs.string() +
         "\nrun_name: run\n"
         "transforms_train: {name: norm}\ntransforms_val: {name: norm}\n"
         "sampler: {name: balance, args: {n_labels: 5, n_instances: 4, epoch_size: 3}}\n"
         "extractor: {name: conv_net, args: {channels: [8, 16, 16], feat_dim: 16}}\n"
         "criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}\n"
         "optimizer: {name: adam, args: {lr: 0.001}}\nmax_epochs: 2\nbs_val: 100\n"
         "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}\n" +
         extra;
}

fs::path train(const TempDir& dir, const std::string& extra, const std::string& args = "") {
  write_file(dir / "train.yaml", config(dir / "logs", extra));
  const auto r =
      run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --progress lines " + args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir / "logs" / "run";
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("Training writes TensorBoard events, worst-query grids and report.html", "[report][integration]") {
  TempDir dir;
  const fs::path run = train(dir, "log_images: true\n");
  const auto files = oml::report::find_event_files(run / "tensorboard");
  REQUIRE(files.size() == 1);
  const auto events = oml::report::read_event_file(files[0]);
  REQUIRE_FALSE(events.empty());
  CHECK(events[0].file_version == "brain.Event:2");
  std::map<std::string, int> scalars, images;
  for (const auto& e : events) {
    if (e.scalar) ++scalars[e.tag];
    if (e.image) {
      ++images[e.tag];
      const at::Tensor decoded = oml::data::decode_image(e.image->png, e.tag);
      CHECK(decoded.size(0) == e.image->height);
      CHECK(decoded.size(1) == e.image->width);
    }
  }
  // Every train.jsonl number per step (2 epochs x 3 steps), every metric per validation.
  for (const char* tag : {"train/loss", "train/lr", "train/samples_per_s", "train/active_tri"})
    CHECK(scalars[tag] == 6);
  for (const char* tag : {"OVERALL/cmc/1", "OVERALL/cmc/5", "OVERALL/precision/5", "OVERALL/map/5"})
    CHECK(scalars[tag] == 2);
  CHECK(images["retrieval/worst_cmc_1"] == 2);  // the checkpoint metric's worst queries
  CHECK(fs::exists(run / "images" / "epoch_001" / "worst_cmc_1.png"));
  CHECK(fs::exists(run / "images" / "epoch_002" / "worst_cmc_1.png"));

  const std::string html = oml::test::read_file(run / "report.html");
  CHECK(count(html, "<svg") >= 8);  // loss, lr, samples/s, loss logs, four metrics
  CHECK_THAT(html,
             Contains("best-metrics") && Contains("From epoch_002") && Contains("data:image/png;base64,"));
}

TEST_CASE("Under two ranks one event file is written, by rank 0, with the global steps",
          "[report][ddp][integration]") {
  TempDir dir;
  const fs::path run = train(dir, "log_images: true\n", "--nproc-per-node 2");
  const auto files = oml::report::find_event_files(run / "tensorboard");
  REQUIRE(files.size() == 1);
  std::vector<int64_t> loss_steps;
  int grids = 0;
  for (const auto& e : oml::report::read_event_file(files[0])) {
    if (e.tag == "train/loss") loss_steps.push_back(e.step);
    if (e.image) ++grids;
  }
  // 3 batches per epoch split over 2 ranks (padded): 2 steps per epoch.
  CHECK(loss_steps == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(grids == 2);
  CHECK(fs::exists(run / "report.html"));
}

TEST_CASE("logger: null writes no event files but the report is still written", "[report][integration]") {
  TempDir dir;
  const fs::path run = train(dir, "logger: null\n", "--set max_epochs=1");
  CHECK_FALSE(fs::exists(run / "tensorboard"));
  CHECK(fs::exists(run / "report.html"));
  CHECK_FALSE(fs::exists(run / "images"));  // log_images defaults to false
}

TEST_CASE("oml-validate --visualize draws the worst queries and the chosen ones", "[report][integration]") {
  TempDir dir;
  const fs::path run = train(dir, "logger: {name: none}\n", "--set max_epochs=1");
  write_file(dir / "validate.yaml",
             "dataset_root: " + fashion_mnist_subset().string() + "\nlogs_root: " + (dir / "logs").string() +
                 "\nrun_name: val\nnum_threads: 1\nnum_workers: 1\nweights: " +
                 (run / "checkpoints" / "best.ckpt").string() +
                 "\ntransforms_val: {name: norm}\n"
                 "extractor: {name: conv_net, args: {channels: [8, 16, 16], feat_dim: 16}}\n");
  const std::string base = "--config " + quote((dir / "validate.yaml").string());
  const auto r = run_oml("oml-validate", base + " --visualize 3 --query-ids 0,7 --visualize-top-k 4");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* name :
       {"worst_cmc_1.png", "worst_cmc_5.png", "worst_precision_5.png", "worst_map_5.png", "queries.png"}) {
    INFO(name);
    const fs::path png = dir / "logs" / "val" / "images" / name;
    REQUIRE(fs::exists(png));
    const at::Tensor image = oml::data::decode_image(oml::test::read_file(png), png.string());
    // 1 query + 4 retrieved + 2 missed ground truth cells per row.
    CHECK(image.size(1) == 8 * 2 + 7 * 112 + 6 * 4 + 2 * 14);
  }

  const auto only =
      run_oml("oml-validate", base + " --set run_name=val2 --visualize 2 --visualize-metric OVERALL/map/5");
  REQUIRE(only.exit_code == 0);
  CHECK(fs::exists(dir / "logs" / "val2" / "images" / "worst_map_5.png"));
  CHECK_FALSE(fs::exists(dir / "logs" / "val2" / "images" / "worst_cmc_1.png"));

  // OML's plotting keys: no grid for an excluded metric, and one per category besides the overall one.
  std::istringstream rows(oml::test::read_file(fashion_mnist_subset() / "df.csv"));
  std::string line, with_categories;
  std::getline(rows, line);
  with_categories = line + ",category\n";
  while (std::getline(rows, line)) {
    with_categories += line + (std::stoi(line.substr(0, line.find(','))) % 2 ? ",odd\n" : ",even\n");
  }
  write_file(dir / "categories.csv", with_categories);
  const auto plots = run_oml(
      "oml-validate", base + " --set run_name=val3 --visualize 2 --set dataframe_name=" +
                          quote((dir / "categories.csv").string()) +
                          " --set 'metric_args={metrics_to_exclude_from_visualization: [precision, map/5], "
                          "visualize_only_overall_category: false}'");
  INFO(plots.err);
  REQUIRE(plots.exit_code == 0);
  for (const char* name : {"worst_cmc_1.png", "worst_even_cmc_1.png", "worst_odd_cmc_5.png"}) {
    CHECK(fs::exists(dir / "logs" / "val3" / "images" / name));
  }
  for (const char* name : {"worst_precision_5.png", "worst_map_5.png", "worst_odd_precision_5.png"}) {
    CHECK_FALSE(fs::exists(dir / "logs" / "val3" / "images" / name));
  }

  const auto not_query = run_oml("oml-validate", base + " --query-ids 5000");
  CHECK(not_query.exit_code == 2);
  CHECK_THAT(not_query.err, Contains("5000") && Contains("not queries"));
  const auto no_per_query =
      run_oml("oml-validate", base + " --visualize 2 --visualize-metric OVERALL/fnmr@fmr/0.1");
  CHECK(no_per_query.exit_code == 2);
  CHECK_THAT(no_per_query.err, Contains("no per-query values"));
  const auto bad_ids = run_oml("oml-validate", base + " --query-ids 1,x");
  CHECK(bad_ids.exit_code == 2);
  CHECK_THAT(bad_ids.err, Contains("--query-ids"));
  const auto bad_progress = run_oml("oml-validate", base + " --progress fancy");
  CHECK(bad_progress.exit_code == 2);
  CHECK_THAT(bad_progress.err, Contains("auto, bar, lines or quiet"));
}

TEST_CASE("Chromium renders report.html with its charts and grids", "[report][integration][browser]") {
  const auto which = oml::test::run("command -v chromium");
  if (which.exit_code != 0) {
    FAIL(
        "chromium is not installed: the report's browser test needs it (bash scripts/setup.sh --with-tests "
        "installs it)");
  }
  TempDir dir;
  const fs::path run = train(dir, "log_images: true\n");
  const std::string url = "file://" + fs::absolute(run / "report.html").string();
  const std::string flags = "--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" +
                            quote((dir / "chromium-profile").string());

  const auto dom = oml::test::run("chromium " + flags + " --dump-dom " + quote(url), 180);
  INFO(dom.err);
  REQUIRE(dom.exit_code == 0);
  CHECK(count(dom.out, "<svg") >= 8);
  CHECK(count(dom.out, "<polyline") >= 8);
  CHECK_THAT(dom.out, Contains("<table id=\"best-metrics\">") && Contains("<img class=\"grid\""));

  const fs::path shot = dir / "report.png";
  const auto screenshot = oml::test::run("chromium " + flags + " --screenshot=" + quote(shot.string()) +
                                             " --window-size=1200,2000 " + quote(url),
                                         180);
  INFO(screenshot.err);
  REQUIRE(screenshot.exit_code == 0);
  REQUIRE(fs::exists(shot));
  const at::Tensor image = oml::data::decode_image(oml::test::read_file(shot), shot.string());
  CHECK(image.size(0) == 2000);
  CHECK(image.size(1) == 1200);
  // Not a blank page: a good share of pixels is not the white background, and colours vary.
  const at::Tensor pixels = image.to(torch::kFloat);
  const double non_white = (pixels.sum(2) < 3 * 250).to(torch::kFloat).mean().item<double>();
  CHECK(non_white > 0.02);
  CHECK(pixels.std().item<double>() > 10);
}

}  // namespace report_tests
