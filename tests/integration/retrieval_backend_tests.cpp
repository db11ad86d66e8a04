// `retrieval_backend:` through the commands (docs/metrics.md#retrieval-backends-retrieval_backend):
// oml-validate on precomputed embeddings and checkpoints, validation during training (recall in
// metrics.jsonl), oml-predict --retrieve, and the bad inputs that must exit with 2.
#include <torch/torch.h>

#include <sstream>

#include "oml/io/npy.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "pipeline_fixtures.h"
#include "support/support.h"

namespace retrieval_backend_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// Labels of the subset's validation rows, in dataframe order.
std::vector<int64_t> validation_labels() {
  const auto df = read_file(fashion_mnist_subset() / "df.csv");
  std::vector<int64_t> labels;
  std::istringstream lines(df);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    if (line.find(",validation,") != std::string::npos)
      labels.push_back(std::stoll(line.substr(0, line.find(','))));
  }
  return labels;
}

// Clustered embeddings of the validation rows: label centre + noise.
fs::path write_embeddings(const fs::path& dir) {
  const auto labels = validation_labels();
  REQUIRE(labels.size() == 300);
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor centres = torch::randn({10, 16}, generator) * 3.0;
  at::Tensor embeddings = torch::randn({300, 16}, generator);
  for (int64_t i = 0; i < 300; ++i) embeddings[i] += centres[labels[static_cast<std::size_t>(i)]];
  oml::io::write_npy(dir / "emb.npy", embeddings);
  return dir / "emb.npy";
}

std::string embeddings_config(const fs::path& dir, const std::string& backend,
                              const std::string& metric_args = "{cmc_top_k: [1, 5], map_top_k: [5]}") {
  return "dataset_root: " + fashion_mnist_subset().string() + "\nlogs_root: " + (dir / "logs").string() +
         "\nembeddings: " + (dir / "emb.npy").string() + "\nmetric_args: " + metric_args + "\n" + backend;
}

// A build without Faiss (OML_WITH_FAISS=OFF, or no libfaiss-dev) cannot run a [faiss] test's
// command; there the test runs it anyway and checks that it stops with exit 2 saying so. ctest
// names these tests "integration (built without Faiss): ..." (tests/CMakeLists.txt).
void check_refused_without_faiss(const CommandResult& r) {
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("built without Faiss") && Contains("retrieval_backend: {name: exact}"));
}

}  // namespace

TEST_CASE("oml-validate with a Faiss backend reports metrics and the measured recall",
          "[retrieval][backends][integration][faiss]") {
  TempDir dir;
  write_embeddings(dir.path());
  write_file(dir / "exact.yaml", embeddings_config(dir.path(), "run_name: exact\n"));
  write_file(dir / "ivf.yaml",
             embeddings_config(dir.path(),
                               "run_name: ivf\nretrieval_backend: {name: faiss_ivf, args: {nlist: 7, "
                               "nprobe: 7}, report_recall: 100}\n"));
  const auto exact = run_oml("oml-validate", "--config " + quote((dir / "exact.yaml").string()));
  INFO(exact.err);
  REQUIRE(exact.exit_code == 0);
  const auto ivf = run_oml("oml-validate", "--config " + quote((dir / "ivf.yaml").string()));
  if (!oml::retrieval::built_with_faiss()) {
    check_refused_without_faiss(ivf);
    CHECK_FALSE(fs::exists(dir / "logs" / "ivf" / "metrics.json"));
    return;
  }
  INFO(ivf.err);
  REQUIRE(ivf.exit_code == 0);
  const auto e = read_json(dir / "logs" / "exact" / "metrics.json");
  const auto a = read_json(dir / "logs" / "ivf" / "metrics.json");
  // nprobe = nlist probes every list: the same neighbours, recall 1.
  // (float32 distances could only swap exact near-ties)
  CHECK(a.at("OVERALL/knn_recall/5").get<double>() >= 0.99);
  CHECK(a.at("OVERALL/cmc/1").get<double>() == Approx(e.at("OVERALL/cmc/1").get<double>()).margin(0.005));
  CHECK(a.at("OVERALL/map/5").get<double>() == Approx(e.at("OVERALL/map/5").get<double>()).margin(0.005));
  CHECK_FALSE(e.contains("OVERALL/knn_recall/5"));
  CHECK_THAT(ivf.err + ivf.out, Contains("recall@5 of faiss_ivf nlist=7 nprobe=7"));
  CHECK_THAT(ivf.out, Contains("OVERALL/knn_recall/5"));
}

TEST_CASE("Bad retrieval_backend input exits with 2 and says what to do",
          "[retrieval][backends][integration]") {
  TempDir dir;
  write_embeddings(dir.path());
  const auto run_with = [&](const std::string& backend,
                            const std::string& metric_args = "{cmc_top_k: [1, 5], map_top_k: [5]}") {
    write_file(dir / "v.yaml", embeddings_config(dir.path(), "run_name: v\n" + backend, metric_args));
    return run_oml("oml-validate", "--config " + quote((dir / "v.yaml").string()));
  };
  {
    const auto r = run_with("retrieval_backend: {name: faiss_ivff}\n");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("unknown retrieval backend 'faiss_ivff'") && Contains("faiss_ivf_pq") &&
                          Contains("v.yaml"));
  }
  {
    const auto r = run_with("retrieval_backend: {name: faiss_hnsw, args: {M: 1}}\n");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("M must be in [2, 256], got 1"));
  }
  {
    const auto r = run_with("retrieval_backend: {name: faiss_ivf, args: {nlsit: 4}}\n");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("nlsit") && Contains("nlist"));
  }
  {
    const auto r = run_with("retrieval_backend: {name: exact, report_recall: -1}\n");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("report_recall"));
  }
  if (oml::retrieval::built_with_faiss()) {
    const auto r = run_with("retrieval_backend: {name: faiss_ivf}\n", "{cmc_top_k: [1], fmr_vals: [0.1]}");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("fnmr@fmr") && Contains("only the retrieval backend 'exact'"));
    const auto big = run_with("retrieval_backend: {name: faiss_ivf, args: {nlist: 1000}}\n");
    CHECK(big.exit_code == 2);
    CHECK_THAT(big.err, Contains("nlist 1000 is larger than the gallery (300 items)"));
    // Found when the gallery is known, reported at the key's place in the config.
    CHECK_THAT(big.err, Contains(".yaml:") && Contains(": retrieval_backend.args.nlist: retrieval backend"));
  } else {
    const auto r = run_with("retrieval_backend: {name: faiss_ivf}\n");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("built without Faiss"));
  }
  for (const auto* out : {"v/metrics.json"}) CHECK_FALSE(fs::exists(dir / "logs" / out));
}

TEST_CASE("oml-predict --retrieve writes each item's nearest other items",
          "[retrieval][backends][integration]") {
  TempDir dir;
  write_file(dir / "p.yaml", validate_config(dir / "logs", "") + "save_dir: " + (dir / "pred").string() +
                                 "\ntransforms_predict: {name: norm}\n");
  // validate_config gives `weights: ` empty: a freshly initialised conv net is enough here.
  const auto r = run_oml("oml-predict", "--config " + quote((dir / "p.yaml").string()) + " --retrieve 5");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const at::Tensor embeddings = oml::io::read_npy_matrix(dir / "pred" / "embeddings.npy");
  const at::Tensor ids = oml::io::read_npy(dir / "pred" / "neighbours_ids.npy");
  const at::Tensor distances = oml::io::read_npy(dir / "pred" / "neighbours_distances.npy");
  REQUIRE(ids.sizes() == at::IntArrayRef({600, 5}));
  REQUIRE(distances.sizes() == at::IntArrayRef({600, 5}));
  // The default backend is exact: the same lists as retrieve_knn over the written embeddings.
  oml::retrieval::ItemSet items;
  items.embeddings = embeddings;
  items.labels.assign(600, 0);
  for (int64_t i = 0; i < 600; ++i) items.ids.push_back(i);
  oml::retrieval::KnnOptions options;
  options.top_k = 5;
  const auto expected = oml::retrieval::retrieve_knn(items, items, options);
  for (int64_t q = 0; q < 600; ++q) {
    for (int64_t i = 0; i < 5; ++i) {
      REQUIRE(ids[q][i].item<int64_t>() == expected.retrieved[expected.begin(q) + i]);
      REQUIRE(distances[q][i].item<float>() == expected.distances[expected.begin(q) + i]);
    }
  }
  const std::string csv = read_file(dir / "pred" / "neighbours.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 600 * 5 + 1);
  CHECK_THAT(csv,
             Contains("query,rank,neighbour,distance\n0,1," + std::to_string(expected.retrieved[0]) + ","));

  if (oml::retrieval::built_with_faiss()) {
    write_file(dir / "hnsw.yaml",
               read_file(dir / "p.yaml") + "retrieval_backend: {name: faiss_hnsw, report_recall: 200}\n");
    const auto hnsw =
        run_oml("oml-predict", "--config " + quote((dir / "hnsw.yaml").string()) + " --retrieve 5");
    INFO(hnsw.err);
    REQUIRE(hnsw.exit_code == 0);
    CHECK_THAT(hnsw.err + hnsw.out, Contains("recall@5 of faiss_hnsw"));
    // A fresh, untrained net embeds differently on each run: compare with the exact neighbours
    // of this run's own embeddings.
    const at::Tensor approximate = oml::io::read_npy(dir / "pred" / "neighbours_ids.npy");
    items.embeddings = oml::io::read_npy_matrix(dir / "pred" / "embeddings.npy");
    const auto exact = oml::retrieval::retrieve_knn(items, items, options);
    int64_t found = 0;
    for (int64_t q = 0; q < 600; ++q) {
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t id = approximate[q][i].item<int64_t>();
        found +=
            std::count(exact.retrieved.begin() + exact.begin(q), exact.retrieved.begin() + exact.end(q), id);
      }
    }
    CHECK(found >= 0.95 * 600 * 5);
  } else {
    write_file(dir / "hnsw.yaml", read_file(dir / "p.yaml") + "retrieval_backend: {name: faiss_hnsw}\n");
    check_refused_without_faiss(
        run_oml("oml-predict", "--config " + quote((dir / "hnsw.yaml").string()) + " --retrieve 5"));
  }
  const auto bad = run_oml("oml-predict", "--config " + quote((dir / "p.yaml").string()) + " --retrieve 0");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--retrieve expects a number of neighbours >= 1"));
}

TEST_CASE("Validation during training uses the backend and logs its recall",
          "[retrieval][backends][integration][faiss]") {
  TempDir dir;
  write_file(dir / "train.yaml",
             train_config(dir / "logs", "retrieval_backend: {name: faiss_hnsw, report_recall: 50}\n"));
  const auto train =
      run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=1");
  if (!oml::retrieval::built_with_faiss()) {
    // Refused when the config is read, before an epoch is spent.
    check_refused_without_faiss(train);
    CHECK_FALSE(fs::exists(dir / "logs" / "run" / "checkpoints"));
    return;
  }
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  const auto records = read_jsonl(dir / "logs" / "run" / "metrics.jsonl");
  REQUIRE(records.size() == 1);
  const double recall = records[0].at("metrics").at("OVERALL/knn_recall/5").get<double>();
  CHECK(recall > 0.5);
  CHECK(recall <= 1.0);
  CHECK_THAT(read_file(dir / "logs" / "run" / "report.html"), Contains("knn_recall"));
}

}  // namespace retrieval_backend_tests
