// Validation under DDP (docs/ddp.md#validation-under-ddp) as a user runs it: oml-validate on 3
// ranks gives the same metrics as on one process. 299 validation rows do not divide by 3, so the
// distributed sampler pads and the Accumulator must drop the duplicates. (The 2-rank case, with
// oml-predict, is in pipeline_tests.cpp.)
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/support.h"

namespace ddp_validation_tests {

using oml::test::fashion_mnist_subset;
using oml::test::quote;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

// The shared subset's dataframe cut to the first `n` rows of each split (what oml-convert
// --limit n writes), with absolute image paths so that it can live in another folder.
std::string first_rows_per_split(const fs::path& subset, int n) {
  std::istringstream in(oml::test::read_file(subset / "df.csv"));
  std::string line;
  std::getline(in, line);
  REQUIRE(line.rfind("label,path,split,", 0) == 0);
  std::string out = line + "\n";
  std::map<std::string, int> kept;
  while (std::getline(in, line)) {
    const std::size_t path_begin = line.find(',') + 1;
    const std::size_t path_end = line.find(',', path_begin);
    const std::string split = line.substr(path_end + 1, line.find(',', path_end + 1) - path_end - 1);
    if (kept[split]++ >= n) continue;
    out += line.substr(0, path_begin) + (subset / line.substr(path_begin, path_end - path_begin)).string() +
           line.substr(path_end) + "\n";
  }
  REQUIRE(kept["validation"] > n);  // the subset has more rows than we keep
  return out;
}

std::map<std::string, double> read_metrics(const fs::path& path) {
  return nlohmann::json::parse(oml::test::read_file(path)).get<std::map<std::string, double>>();
}

}  // namespace

TEST_CASE("oml-validate on 3 ranks gives the metrics of one process (padded shards)",
          "[pipelines][ddp][integration]") {
  TempDir dir;
  const fs::path data = dir / "fmnist";
  write_file(data / "df.csv", first_rows_per_split(fashion_mnist_subset(), 299));
  const std::string common = "dataset_root: " + data.string() + "\nlogs_root: " + (dir / "logs").string() +
                             "\nseed: 3\nnum_threads: 1\nnum_workers: 1\ntransforms_val: {name: norm}\n"
                             "extractor: {name: conv_net, args: {channels: [8, 16, 16], feat_dim: 16}}\n";
  write_file(dir / "train.yaml",
             common +
                 "pipeline: extractor\nrun_name: run\ntransforms_train: {name: norm}\n"
                 "sampler: {name: balance, args: {n_labels: 5, n_instances: 4, epoch_size: 2}}\n"
                 "criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}\n"
                 "optimizer: {name: adam, args: {lr: 0.001}}\nmax_epochs: 1\nvalid_period: 1\nbs_val: 64\n"
                 "metric_args: {cmc_top_k: [1]}\n");
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  write_file(
      dir / "validate.yaml",
      common + "weights: " + (dir / "logs" / "run" / "checkpoints" / "last.ckpt").string() +
          "\nbs_val: 32\n"
          "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5], fmr_vals: [0.1, 0.5]}\n");
  const std::string config = "--config " + quote((dir / "validate.yaml").string());

  const auto one = run_oml("oml-validate", config + " --set run_name=one");
  const auto three = run_oml("oml-validate", "--nproc-per-node 3 " + config + " --set run_name=three");
  INFO(one.err << three.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(three.exit_code == 0);
  const auto a = read_metrics(dir / "logs" / "one" / "metrics.json");
  const auto b = read_metrics(dir / "logs" / "three" / "metrics.json");
  REQUIRE(a.size() == b.size());
  REQUIRE(a.count("OVERALL/fnmr@fmr/0.1") == 1);
  for (const auto& [key, value] : a) {
    INFO(key);
    REQUIRE(b.count(key) == 1);
    CHECK(b.at(key) == Approx(value).margin(1e-6));
  }
}

}  // namespace ddp_validation_tests
