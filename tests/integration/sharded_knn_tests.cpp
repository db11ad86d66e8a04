// The k-NN split over ranks (docs/ddp.md#the-k-nn-split-over-the-ranks) with real processes on
// loopback (Gloo): the lists every rank receives, and the metrics, equal one process's bit for
// bit at 2 and 3 ranks — exact (oml_ddp_worker's "sharded_knn" scenario) and with each Faiss
// backend ("sharded_backend"), in the library and in `oml-validate --nproc-per-node W`.
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "distributed_worker/sharded_knn_scenario.h"
#include "oml/io/npy.h"
#include "oml/metrics/clustering.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "shell/components.h"
#include "support/support.h"

namespace sharded_knn_tests {

using oml::test::quote;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;
namespace ddp = oml::test::ddp;

namespace {

// What a rank of the scenario must write, computed here in one process without any split. With
// fnmr@fmr the metrics are not split: rank 0 computes them alone, the others get an empty result.
std::string expected_scenario_output(bool fnmr, bool main_rank) {
  oml::cli::register_builtins();
  const auto [queries, gallery] = ddp::sharded_knn_items();
  std::string text;
  for (const char* axis : {"queries", "gallery"}) {
    text += std::string("axis ") + axis + "\n" +
            ddp::dump(oml::retrieval::retrieve_knn(queries, gallery, ddp::sharded_knn_options()));
  }
  oml::metrics::EmbeddingMetricsOptions options;
  options.metrics = oml::metrics::configure_metrics(ddp::sharded_knn_metric_args(fnmr));
  options.memory_budget_mb = 0.01;  // many blocks
  const auto metrics = fnmr && !main_rank
                           ? oml::metrics::EmbeddingMetricsResult{}
                           : oml::metrics::compute_embedding_metrics(ddp::sharded_knn_rows(), options);
  return text + "metrics\n" + ddp::dump(metrics);
}

std::map<std::string, double> read_metrics(const fs::path& path) {
  return nlohmann::json::parse(oml::test::read_file(path)).get<std::map<std::string, double>>();
}

}  // namespace

TEST_CASE("The k-NN split over 2 and 3 ranks gives every rank one process's lists and metrics exactly",
          "[ddp][retrieval]") {
  // With fnmr@fmr the metrics are not split: rank 0's equal one process's, the others are empty.
  for (const bool fnmr : {false, true}) {
    const std::string expected_main = expected_scenario_output(fnmr, true);
    const std::string expected_other = expected_scenario_output(fnmr, false);
    for (int world : {2, 3}) {
      INFO("world " << world << ", fnmr " << fnmr);
      TempDir dir;
      const auto r = oml::test::run(quote(OML_DDP_WORKER) + " --nproc-per-node " + std::to_string(world) +
                                        " --scenario sharded_knn --out " + quote(dir.path().string()) +
                                        (fnmr ? " --fnmr" : ""),
                                    120);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      for (int rank = 0; rank < world; ++rank) {
        INFO("rank " << rank);
        CHECK(oml::test::read_file(dir / ("rank" + std::to_string(rank) + ".txt")) ==
              (rank == 0 ? expected_main : expected_other));
      }
    }
  }
}

TEST_CASE("oml-validate --nproc-per-node 2 and 3 write one process's metrics exactly",
          "[pipelines][ddp][integration]") {
  TempDir dir;
  // Precomputed embeddings (the same rows in every run) on a few integer values: many equal
  // distances, so the order of ties decides cmc, precision and map.
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(17);
  oml::io::write_npy(dir / "emb.npy", torch::randint(0, 3, {300, 6}, generator).to(torch::kFloat));
  write_file(dir / "v.yaml",
             "dataset_root: " + oml::test::fashion_mnist_subset().string() +
                 "\nlogs_root: " + (dir / "logs").string() + "\nembeddings: " + (dir / "emb.npy").string() +
                 "\nnum_threads: 1" +
                 "\nmetric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5, 10], " +
                 // PML's AccuracyCalculator metrics: their lists reach max R; nmi and ami run Faiss's
                 // k-means on every rank (a build without Faiss refuses them).
                 "mean_average_precision_at_r: true, r_precision: true, mrr: true, precision_at_1: true" +
                 (oml::metrics::kmeans_available() ? ", nmi: true, ami: true" : "") + "}\n");
  const std::string config = "--config " + quote((dir / "v.yaml").string());
  std::map<int, std::map<std::string, double>> metrics;
  for (int world : {1, 2, 3}) {
    const auto r = oml::test::run_oml("oml-validate", config + " --nproc-per-node " + std::to_string(world) +
                                                          " --set run_name=w" + std::to_string(world));
    INFO("world " << world << "\n" << r.err);
    REQUIRE(r.exit_code == 0);
    if (world > 1) CHECK_THAT(r.err, Catch::Contains("k-NN split over " + std::to_string(world) + " ranks"));
    metrics[world] = read_metrics(dir / "logs" / ("w" + std::to_string(world)) / "metrics.json");
  }
  REQUIRE(metrics[1].count("OVERALL/map/10") == 1);
  REQUIRE(metrics[1].count("OVERALL/mean_average_precision_at_r") == 1);
  REQUIRE(metrics[1].count("OVERALL/mrr") == 1);
  if (oml::metrics::kmeans_available()) REQUIRE(metrics[1].count("OVERALL/ami") == 1);
  CHECK(metrics[2] == metrics[1]);
  CHECK(metrics[3] == metrics[1]);
}

TEST_CASE("A Faiss backend split over 2 and 3 ranks gives every rank one process's lists, metrics and recall",
          "[ddp][retrieval][backends][faiss]") {
  if (!oml::retrieval::built_with_faiss()) {
    CHECK_THROWS_WITH(ddp::sharded_backend("faiss_ivf"), Catch::Contains("built without Faiss"));
    return;
  }
  // One thread here as on each rank: faiss_hnsw builds the same graph only then; the others
  // build the same index with any number of threads.
  const int threads = at::get_num_threads();
  for (const char* name : {"faiss_flat", "faiss_ivf", "faiss_ivf_pq", "faiss_hnsw"}) {
    at::set_num_threads(1);
    const std::string expected = ddp::sharded_backend_output(*ddp::sharded_backend(name), nullptr);
    at::set_num_threads(threads);
    REQUIRE_THAT(expected, Catch::Contains("OVERALL/knn_recall/10"));
    for (int world : {2, 3}) {
      INFO(name << ", world " << world);
      TempDir dir;
      const auto r = oml::test::run(quote(OML_DDP_WORKER) + " --nproc-per-node " + std::to_string(world) +
                                        " --scenario sharded_backend --backend " + name + " --out " +
                                        quote(dir.path().string()),
                                    120);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      for (int rank = 0; rank < world; ++rank) {
        INFO("rank " << rank);
        CHECK(oml::test::read_file(dir / ("rank" + std::to_string(rank) + ".txt")) == expected);
      }
    }
  }
}

TEST_CASE("oml-validate --nproc-per-node 2 and 3 with faiss_ivf and faiss_hnsw write one process's metrics",
          "[pipelines][ddp][integration][backends][faiss]") {
  TempDir dir;
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(19);
  oml::io::write_npy(dir / "emb.npy", torch::randn({300, 8}, generator));
  for (const char* name : {"faiss_ivf", "faiss_hnsw"}) {
    write_file(dir / "v.yaml", "dataset_root: " + oml::test::fashion_mnist_subset().string() +
                                   "\nlogs_root: " + (dir / "logs").string() +
                                   "\nembeddings: " + (dir / "emb.npy").string() + "\nnum_threads: 1" +
                                   "\nmetric_args: {cmc_top_k: [1, 5], map_top_k: [5, 10]}" +
                                   "\nretrieval_backend: {name: " + name + ", report_recall: 50}\n");
    const std::string config = "--config " + quote((dir / "v.yaml").string());
    std::map<int, std::map<std::string, double>> metrics;
    for (int world : {1, 2, 3}) {
      const std::string run = std::string(name) + "_w" + std::to_string(world);
      const auto r = oml::test::run_oml(
          "oml-validate", config + " --nproc-per-node " + std::to_string(world) + " --set run_name=" + run);
      INFO(name << ", world " << world << "\n" << r.err);
      if (!oml::retrieval::built_with_faiss()) {  // refused on every rank count, before any work
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains("built without Faiss"));
        continue;
      }
      REQUIRE(r.exit_code == 0);
      if (world > 1) {
        CHECK_THAT(r.err, Catch::Contains("k-NN split over " + std::to_string(world) +
                                          " ranks by queries: every rank builds its own " + name +
                                          " index over the whole gallery (the same index"));
      }
      metrics[world] = read_metrics(dir / "logs" / run / "metrics.json");
    }
    if (!oml::retrieval::built_with_faiss()) continue;
    INFO(name);
    REQUIRE(metrics[1].count("OVERALL/knn_recall/10") == 1);
    CHECK(metrics[2] == metrics[1]);
    CHECK(metrics[3] == metrics[1]);
  }
}

}  // namespace sharded_knn_tests
