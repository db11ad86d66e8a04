// The pairwise pipelines end to end: a re-ranker trained over a trained extractor's cached
// embeddings (single process and 2 ranks), re-ranked validation with oml-validate, the
// embeddings cache, an image pairwise model, and the mistakes a new user makes.
#include <torch/torch.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "oml/retrieval/backend.h"
#include "support/support.h"

namespace pairwise_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// An extractor trained once per test binary run (2 epochs on the subset): what the pairwise
// pipelines start from.
const fs::path& trained_extractor() {
  static TempDir dir;
  static const fs::path checkpoint = [] {
    write_file(dir / "train.yaml", train_config(dir / "logs"));
    const auto r = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return dir / "logs" / "run" / "checkpoints" / "best.ckpt";
  }();
  return checkpoint;
}

const std::string kExtractor = "extractor: {name: conv_net, args: {channels: [8, 16, 16], feat_dim: 16}}\n";
const std::string kMetrics = "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}\n";

std::string pairwise_common(const fs::path& logs, const fs::path& extractor_weights) {
  return "pipeline: pairwise\nseed: 3\nnum_threads: 1\nnum_workers: 1\n"
         "dataset_root: " +
         fashion_mnist_subset().string() + "\nlogs_root: " + logs.string() +
         "\n"
         "embeddings_cache_dir: " +
         (logs / "cache").string() +
         "\n"
         "weights: " +
         extractor_weights.string() +
         "\n"
         "transforms_extraction: {name: norm}\ntransforms_train: {name: norm}\ntransforms_val: {name: "
         "norm}\n" +
         kExtractor + "postprocessor: {name: pairwise_reranker, args: {top_n: 5, batch_size: 64}}\n" +
         kMetrics;
}

std::string pairwise_train_config(const fs::path& logs, const std::string& extra = "") {
  return pairwise_common(logs, trained_extractor()) +
         "run_name: pairwise\n"
         "pairwise_model: {name: linear_siamese, args: {feat_dim: 16}}\n"
         "sampler: {name: balance, args: {n_labels: 5, n_instances: 4, epoch_size: 3}}\n"
         "optimizer: {name: adam, args: {lr: 0.01}}\n"
         "max_epochs: 2\nvalid_period: 1\n" +
         extra;
}

std::string pairwise_validate_config(const fs::path& logs, const fs::path& extractor_weights,
                                     const std::string& pairwise_weights) {
  return pairwise_common(logs, extractor_weights) + "run_name: validation\n" +
         "pairwise_model: {name: linear_siamese, args: {feat_dim: 16" +
         (pairwise_weights.empty() ? std::string() : ", weights: " + pairwise_weights) + "}}\n";
}

std::size_t files_in(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.is_regular_file() ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("Pairwise training re-ranks validation, and oml-validate reproduces its metrics",
          "[pipelines][pairwise][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", pairwise_train_config(dir / "logs", "log_images: true\n"));
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const fs::path run = dir / "logs" / "pairwise";
  CHECK_FALSE(fs::is_empty(run / "images"));  // worst-query grids of the re-ranked lists
  for (const char* file : {"config.yaml", "train.jsonl", "metrics.jsonl", "checkpoints/best.ckpt",
                           "checkpoints/last.ckpt", "report.html", "tensorboard"}) {
    INFO(file);
    CHECK(fs::exists(run / file));
  }
  // The report plots the extractor's own metrics as a "before_reranking/OVERALL" line next to
  // the re-ranked "OVERALL" one on each metric's chart.
  CHECK_THAT(read_file(run / "report.html"), Contains("before_reranking/OVERALL") && Contains("map/5"));
  const auto steps = read_jsonl(run / "train.jsonl");
  REQUIRE(steps.size() == 6);
  for (const char* key : {"loss", "lr", "samples_per_s", "pairs", "pair_accuracy"})
    CHECK(steps[0].contains(key));

  // Metrics before re-ranking are the extractor's own: what its training logged for best.ckpt.
  const auto records = read_jsonl(run / "metrics.jsonl");
  REQUIRE(records.size() == 2);
  const auto first = records.front().at("metrics").get<std::map<std::string, double>>();
  const auto extractor_metrics = best_metrics(trained_extractor().parent_path().parent_path());
  for (const auto& [key, value] : extractor_metrics) {
    INFO(key);
    REQUIRE(first.count("before_reranking/" + key) == 1);
    CHECK(first.at("before_reranking/" + key) == Approx(value).margin(1e-6));
    CHECK(first.count(key) == 1);
  }

  // Both splits' embeddings were cached once; a second run reads them.
  CHECK(files_in(dir / "logs" / "cache") == 2);
  const auto again = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) +
                                              " --set run_name=again --set max_epochs=1");
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out + again.err,
             Contains("using cached train embeddings") && Contains("using cached validation embeddings"));
  CHECK(files_in(dir / "logs" / "cache") == 2);

  // oml-validate on the pairwise best.ckpt gives the metrics training logged for it.
  write_file(dir / "validate.yaml", pairwise_validate_config(dir / "logs", trained_extractor(),
                                                             (run / "checkpoints" / "best.ckpt").string()));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.out << validate.err);
  REQUIRE(validate.exit_code == 0);
  check_same_metrics(best_metrics(run), metrics_json(dir / "logs" / "validation" / "metrics.json"));
  CHECK_THAT(validate.out, Contains("before_reranking/OVERALL/cmc/1"));
}

TEST_CASE("An identity linear_siamese re-ranker leaves the metrics unchanged",
          "[pipelines][pairwise][integration]") {
  TempDir dir;
  write_file(dir / "validate.yaml", pairwise_validate_config(dir / "logs", trained_extractor(), ""));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.out << validate.err);
  REQUIRE(validate.exit_code == 0);
  const auto metrics = metrics_json(dir / "logs" / "validation" / "metrics.json");
  int compared = 0;
  for (const auto& [key, value] : metrics) {
    if (key.rfind("before_reranking/", 0) == 0) continue;
    INFO(key);
    REQUIRE(metrics.count("before_reranking/" + key) == 1);
    CHECK(value == Approx(metrics.at("before_reranking/" + key)).margin(1e-9));
    ++compared;
  }
  CHECK(compared == 4);
}

TEST_CASE("The re-ranker receives a Faiss backend's top-n: faiss_flat gives exact's metrics",
          "[pipelines][pairwise][integration][faiss]") {
  TempDir dir;
  // A trained (not identity) re-ranker, so that re-ranking changes the lists it is given.
  write_file(dir / "train.yaml", pairwise_train_config(dir / "logs"));
  const auto train =
      run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=1");
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const fs::path pairwise_weights = dir / "logs" / "pairwise" / "checkpoints" / "best.ckpt";
  const auto validate = [&](const std::string& run_name, const std::string& backend) {
    write_file(
        dir / (run_name + ".yaml"),
        pairwise_validate_config(dir / "logs", trained_extractor(), pairwise_weights.string()) + backend);
    return run_oml("oml-validate", "--config " + quote((dir / (run_name + ".yaml")).string()) +
                                       " --set run_name=" + run_name);
  };
  const auto exact = validate("exact", "");
  INFO(exact.out << exact.err);
  REQUIRE(exact.exit_code == 0);
  const auto flat = validate("flat", "retrieval_backend: {name: faiss_flat}\n");
  if (!oml::retrieval::built_with_faiss()) {
    INFO(flat.out << flat.err);
    CHECK(flat.exit_code == 2);
    CHECK_THAT(flat.err, Contains("built without Faiss"));
    CHECK_FALSE(fs::exists(dir / "logs" / "flat" / "metrics.json"));
    return;
  }
  INFO(flat.out << flat.err);
  REQUIRE(flat.exit_code == 0);
  CHECK_THAT(flat.err + flat.out, Contains("k-NN with faiss_flat"));
  // faiss_flat is exhaustive: the same top-5 lists before re-ranking, so the same re-ranked ones.
  const auto exact_metrics = metrics_json(dir / "logs" / "exact" / "metrics.json");
  const auto flat_metrics = metrics_json(dir / "logs" / "flat" / "metrics.json");
  check_same_metrics(exact_metrics, flat_metrics);
  CHECK(exact_metrics.size() == flat_metrics.size());
  // The re-ranker changed something, so equal re-ranked metrics are not a coincidence of
  // identity re-ranking.
  bool reranked = false;
  for (const auto& [key, value] : exact_metrics) {
    if (key.rfind("before_reranking/", 0) == 0) continue;
    reranked = reranked || std::abs(value - exact_metrics.at("before_reranking/" + key)) > 1e-9;
  }
  CHECK(reranked);

  // An approximate backend (nlist 7, nprobe 1 on 300 items): runs, re-ranks and reports its recall.
  const auto ivf = validate("ivf", "retrieval_backend: {name: faiss_ivf, report_recall: 100}\n");
  INFO(ivf.out << ivf.err);
  REQUIRE(ivf.exit_code == 0);
  const auto ivf_metrics = metrics_json(dir / "logs" / "ivf" / "metrics.json");
  for (const char* key : {"OVERALL/cmc/1", "before_reranking/OVERALL/cmc/1", "OVERALL/map/5",
                          "before_reranking/OVERALL/knn_recall/5"}) {
    INFO(key);
    CHECK(ivf_metrics.count(key) == 1);
  }
  CHECK_THAT(ivf.err + ivf.out, Contains("recall@5 of faiss_ivf"));
}

TEST_CASE("Two-rank DDP pairwise training checkpoints once and matches single-process validation",
          "[pipelines][pairwise][ddp][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", pairwise_train_config(dir / "logs"));
  const auto train =
      run_oml("oml-train", "--nproc-per-node 2 --config " + quote((dir / "train.yaml").string()));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const fs::path run = dir / "logs" / "pairwise";
  CHECK(fs::exists(run / "checkpoints" / "best.ckpt"));
  CHECK(read_jsonl(run / "metrics.jsonl").size() == 2);
  CHECK(read_jsonl(run / "train.jsonl").size() == 4);  // 3 batches per epoch over 2 ranks (padded)
  CHECK(files_in(dir / "logs" / "cache") == 2);

  write_file(dir / "validate.yaml", pairwise_validate_config(dir / "logs", trained_extractor(),
                                                             (run / "checkpoints" / "best.ckpt").string()));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.out << validate.err);
  REQUIRE(validate.exit_code == 0);
  check_same_metrics(best_metrics(run), metrics_json(dir / "logs" / "validation" / "metrics.json"));
}

TEST_CASE("An image pairwise model (concat_siamese) trains and re-ranks",
          "[pipelines][pairwise][integration]") {
  TempDir dir;
  const std::string model =
      "pairwise_model: {name: concat_siamese, args: {mlp_hidden_dims: [8], use_tta_swap: true, "
      "extractor: {name: conv_net, args: {channels: [4, 8, 8], feat_dim: 8}}}}\n";
  std::string config = pairwise_train_config(dir / "logs");
  config.replace(config.find("pairwise_model:"),
                 config.find('\n', config.find("pairwise_model:")) + 1 - config.find("pairwise_model:"),
                 model);
  write_file(dir / "train.yaml", config);
  const auto train =
      run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=1");
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const auto records = read_jsonl(dir / "logs" / "pairwise" / "metrics.jsonl");
  REQUIRE(records.size() == 1);
  const auto metrics = records[0].at("metrics").get<std::map<std::string, double>>();
  CHECK(metrics.count("OVERALL/cmc/1") == 1);
  CHECK(metrics.count("before_reranking/OVERALL/cmc/1") == 1);
  // Re-ranking only reorders each query's top 5: cmc@5 cannot change.
  CHECK(metrics.at("OVERALL/cmc/5") == Approx(metrics.at("before_reranking/OVERALL/cmc/5")).margin(1e-9));
}

TEST_CASE("The embeddings cache is keyed by the extractor's weights", "[pipelines][pairwise][integration]") {
  TempDir dir;
  write_file(dir / "other.yaml", train_config(dir / "other"));
  const auto other = run_oml(
      "oml-train", "--config " + quote((dir / "other.yaml").string()) + " --set seed=11 --set max_epochs=1");
  INFO(other.err);
  REQUIRE(other.exit_code == 0);
  const fs::path other_weights = dir / "other" / "run" / "checkpoints" / "last.ckpt";

  write_file(dir / "a.yaml", pairwise_validate_config(dir / "logs", trained_extractor(), ""));
  write_file(dir / "b.yaml", pairwise_validate_config(dir / "logs", other_weights, ""));
  REQUIRE(run_oml("oml-validate", "--config " + quote((dir / "a.yaml").string())).exit_code == 0);
  CHECK(files_in(dir / "logs" / "cache") == 1);
  REQUIRE(run_oml("oml-validate", "--config " + quote((dir / "a.yaml").string())).exit_code == 0);
  CHECK(files_in(dir / "logs" / "cache") == 1);
  REQUIRE(run_oml("oml-validate", "--config " + quote((dir / "b.yaml").string())).exit_code == 0);
  CHECK(files_in(dir / "logs" / "cache") == 2);
}

TEST_CASE("Resuming pairwise training from last.ckpt continues exactly like an uninterrupted run",
          "[pipelines][pairwise][integration]") {
  TempDir dir;
  write_file(dir / "full.yaml", pairwise_train_config(dir / "full"));
  REQUIRE(run_oml("oml-train", "--config " + quote((dir / "full.yaml").string())).exit_code == 0);

  write_file(dir / "part.yaml", pairwise_train_config(dir / "part"));
  REQUIRE(run_oml("oml-train", "--config " + quote((dir / "part.yaml").string()) + " --set max_epochs=1")
              .exit_code == 0);
  const fs::path last = dir / "part" / "pairwise" / "checkpoints" / "last.ckpt";
  const auto resumed = run_oml(
      "oml-train", "--config " + quote((dir / "part.yaml").string()) + " --resume " + quote(last.string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);

  check_same_training_log(dir / "full" / "pairwise" / "train.jsonl",
                          dir / "part" / "pairwise" / "train.jsonl", "pairs");
  auto last_metrics = [](const fs::path& run) {
    return read_jsonl(run / "metrics.jsonl").back().at("metrics").get<std::map<std::string, double>>();
  };
  check_same_metrics(last_metrics(dir / "full" / "pairwise"), last_metrics(dir / "part" / "pairwise"));
}

TEST_CASE("Bad pairwise input fails early with a clear message", "[pipelines][pairwise][integration]") {
  TempDir dir;
  auto train_with = [&](const std::string& config) {
    write_file(dir / "bad.yaml", config);
    return run_oml("oml-train", "--config " + quote((dir / "bad.yaml").string()));
  };
  SECTION("no trained extractor") {
    std::string config = pairwise_train_config(dir / "logs");
    config.replace(config.find("weights: "),
                   config.find('\n', config.find("weights: ")) - config.find("weights: "), "weights: null");
    const auto r = train_with(config);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("trained extractor") && Contains("weights"));
  }
  SECTION("no pairwise model") {
    std::string config = pairwise_train_config(dir / "logs");
    config.erase(config.find("pairwise_model:"),
                 config.find('\n', config.find("pairwise_model:")) + 1 - config.find("pairwise_model:"));
    const auto r = train_with(config);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("pairwise_model"));
  }
  SECTION("no postprocessor to validate with") {
    std::string config = pairwise_train_config(dir / "logs");
    config.erase(config.find("postprocessor:"),
                 config.find('\n', config.find("postprocessor:")) + 1 - config.find("postprocessor:"));
    const auto r = train_with(config);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("postprocessor"));
  }
  SECTION("a re-ranker that would re-score a single item") {
    std::string config = pairwise_train_config(dir / "logs");
    config.replace(config.find("top_n: 5"), 8, "top_n: 1");
    const auto r = train_with(config);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("top_n must be > 1"));
  }
  SECTION("a checkpoint metric that is not computed") {
    const auto r =
        train_with(pairwise_train_config(dir / "logs", "metric_for_checkpointing: OVERALL/cmc/10\n"));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("OVERALL/cmc/10"));
  }
  SECTION("freeze_n_epochs with a pairwise model that has no backbone to freeze") {
    const auto r = train_with(pairwise_train_config(dir / "logs", "freeze_n_epochs: 1\n"));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("freeze_n_epochs") && Contains("has no backbone to freeze") &&
                          Contains("concat_siamese"));
  }
  CHECK_FALSE(fs::exists(dir / "logs" / "pairwise" / "checkpoints"));
  CHECK_FALSE(fs::exists(dir / "logs" / "cache"));  // no embedding pass ran
}

}  // namespace pairwise_tests
