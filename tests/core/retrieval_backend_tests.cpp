// Retrieval backends (docs/metrics.md#retrieval-backends-retrieval_backend): `exact` is
// retrieve_knn; the Faiss backends keep the exact backend's rules (ignored pairs, Euclidean
// distances, ascending lists), their recall is measured, and bad args fail with exit-2 errors
// that name the limit.
#include <torch/torch.h>

#include <dlfcn.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/fnmr.h"
#include "oml/metrics/metric_table.h"
#include "oml/metrics/open_set.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/gallery_index.h"
#include "oml/retrieval/postprocessor.h"
#include "oml/retrieval/sharded_knn.h"
#include "shell/components.h"
#include "support/support.h"

namespace retrieval_backend_tests {

using namespace oml;
using Catch::Matchers::Contains;

namespace {

// Clustered data like real embeddings: `classes` centres, items = centre + noise.
retrieval::ItemSet clustered(int64_t n, int64_t dim, int64_t classes, double noise, uint64_t seed,
                             int64_t first_id = 0) {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto labels = torch::randint(0, classes, {n}, generator);
  const auto centres = torch::randn({classes, dim}, generator) * 4.0;
  retrieval::ItemSet set;
  set.embeddings = (centres.index_select(0, labels) + noise * torch::randn({n, dim}, generator)).contiguous();
  for (int64_t i = 0; i < n; ++i) {
    set.labels.push_back(labels[i].item<int64_t>());
    set.ids.push_back(first_id + i);
  }
  return set;
}

config::ComponentSpec spec_of(const std::string& yaml) {
  static std::vector<config::Document> keep;  // specs point into their document
  keep.push_back(config::Document::from_string(yaml, "test.yaml"));
  const config::Node root = keep.back().root();
  return config::parse_component(root, "retrieval_backend");
}

std::shared_ptr<retrieval::RetrievalBackend> backend(const std::string& yaml) {
  oml::cli::register_builtins();
  return registries().retrieval_backends.create(spec_of(yaml), {});
}

std::vector<int64_t> list(const retrieval::RetrievalResults& r, int64_t q) {
  return {r.retrieved.begin() + r.begin(q), r.retrieved.begin() + r.end(q)};
}

// A [faiss] test in a build without Faiss (OML_WITH_FAISS=OFF, or no libfaiss-dev) checks what a
// user gets there instead, the backend refusing to be built, and stops; ctest names these tests
// "core (built without Faiss): ..." (tests/CMakeLists.txt), so the skip shows.
bool refused_without_faiss(const std::string& yaml) {
  if (retrieval::built_with_faiss()) return false;
  INFO(yaml);
  CHECK_THROWS_AS(backend(yaml), ConfigError);
  CHECK_THROWS_WITH(backend(yaml),
                    Contains("built without Faiss") && Contains("retrieval_backend: {name: exact}"));
  return true;
}

// A validation set in which every item is a query and a gallery item.
metrics::EmbeddingSet every_item_query_and_gallery(const retrieval::ItemSet& items) {
  metrics::EmbeddingSet set;
  set.embeddings = items.embeddings;
  set.labels = items.labels;
  set.is_query.assign(items.labels.size(), 1);
  set.is_gallery.assign(items.labels.size(), 1);
  return set;
}

retrieval::KnnOptions top(int64_t k) {
  retrieval::KnnOptions options;
  options.top_k = k;
  return options;
}

}  // namespace

TEST_CASE("The exact backend is retrieve_knn and the default", "[retrieval][backends]") {
  const auto items = clustered(300, 8, 20, 1.0, 1);
  const auto expected = retrieval::retrieve_knn(items, items, top(7));
  const auto exact = backend("{name: exact}");
  CHECK(exact->exact());
  const auto found = exact->search(items, items, top(7));
  CHECK(found.retrieved == expected.retrieved);
  CHECK(found.distances == expected.distances);
  CHECK(found.offsets == expected.offsets);
  CHECK(retrieval::make_exact_backend()->exact());
}

TEST_CASE("Every backend kind is registered with its args in the help", "[retrieval][backends]") {
  oml::cli::register_builtins();
  // The built-in kinds (a test that loaded the fixture plugin in this process adds its own).
  std::vector<std::string> names;
  for (const auto& name : registries().retrieval_backends.names()) {
    if (name.rfind("fixture_", 0) != 0) names.push_back(name);
  }
  CHECK(names == std::vector<std::string>{"exact", "faiss_flat", "faiss_hnsw", "faiss_ivf", "faiss_ivf_pq"});
}

TEST_CASE("Unknown backends and args are config errors naming the known ones", "[retrieval][backends]") {
  oml::cli::register_builtins();
  CHECK_THROWS_AS(backend("{name: faiss_lsh}"), ConfigError);
  CHECK_THROWS_WITH(backend("{name: faiss_lsh}"), Contains("unknown retrieval backend 'faiss_lsh'") &&
                                                      Contains("faiss_ivf") && Contains("exact"));
  CHECK_THROWS_AS(backend("{name: faiss_ivf, args: {nprobes: 8}}"), ConfigError);
  CHECK_THROWS_WITH(backend("{name: faiss_ivf, args: {nprobes: 8}}"),
                    Contains("nprobes") && Contains("nprobe"));
  CHECK_THROWS_AS(backend("{name: exact, args: {nlist: 8}}"), ConfigError);
}

TEST_CASE("Out-of-range backend args fail with the limit", "[retrieval][backends]") {
  oml::cli::register_builtins();
  CHECK_THROWS_WITH(backend("{name: faiss_hnsw, args: {M: 1}}"), Contains("M must be in [2, 256], got 1"));
  CHECK_THROWS_WITH(backend("{name: faiss_hnsw, args: {M: 1000}}"), Contains("M must be in [2, 256]"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf_pq, args: {nbits: 17}}"),
                    Contains("nbits must be in [1, 16], got 17"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf_pq, args: {nbits: 0}}"), Contains("nbits must be in [1, 16]"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf, args: {nlist: 8, nprobe: 9}}"),
                    Contains("nprobe 9 is larger than nlist 8"));
  CHECK_THROWS_WITH(backend("{name: faiss_hnsw, args: {ef_search: -1}}"), Contains("ef_search must be >= 1"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf, args: {target_recall: 1.5}}"),
                    Contains("target_recall must be in (0, 1] (or 0: the fixed defaults), got 1.5"));
  CHECK_THROWS_WITH(backend("{name: faiss_hnsw, args: {tune_queries: 0}}"),
                    Contains("tune_queries must be >= 1, got 0"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf_pq, args: {refine: 65}}"),
                    Contains("refine must be in [1, 64]"));
  CHECK_THROWS_AS(backend("{name: faiss_hnsw, args: {M: 1}}"), ConfigError);
}

TEST_CASE("A Faiss backend says whether this build has Faiss", "[retrieval][backends]") {
  oml::cli::register_builtins();
  if (retrieval::built_with_faiss()) {
    CHECK(backend("{name: faiss_ivf}")->name() == "faiss_ivf");
  } else {
    CHECK_THROWS_AS(backend("{name: faiss_ivf}"), ConfigError);
    CHECK_THROWS_WITH(backend("{name: faiss_ivf}"), Contains("built without Faiss"));
  }
}

TEST_CASE("measure_recall compares with the exact top-k of sampled queries", "[retrieval][backends]") {
  const auto items = clustered(200, 6, 10, 1.0, 2);
  auto exact = retrieval::retrieve_knn(items, items, top(4));
  auto all = retrieval::measure_recall(exact, items, items, top(4), 1000, 7);
  CHECK(all.queries == 200);
  CHECK(all.k == 4);
  CHECK(all.recall == 1.0);
  // Replace the last item of every list by one that is not among the exact top 4: recall 3/4.
  auto worse = exact;
  for (int64_t q = 0; q < worse.num_queries(); ++q) {
    const auto ids = list(exact, q);
    int64_t other = 0;
    while (other == q || std::find(ids.begin(), ids.end(), other) != ids.end()) ++other;
    worse.retrieved[worse.end(q) - 1] = other;
  }
  CHECK(retrieval::measure_recall(worse, items, items, top(4), 50, 7).recall == Approx(0.75));
  CHECK(retrieval::measure_recall(worse, items, items, top(4), 50, 7).queries == 50);
  CHECK(retrieval::recall_metric_key(10) == "OVERALL/knn_recall/10");
}

TEST_CASE("faiss_flat and exhaustive faiss_ivf find the exact neighbours", "[retrieval][backends][faiss]") {
  if (refused_without_faiss("{name: faiss_flat}")) return;
  const auto queries = clustered(150, 16, 12, 1.0, 3, /*first_id=*/0);
  const auto gallery = clustered(800, 16, 12, 1.0, 4, /*first_id=*/100);  // ids 100..149 shared: ignored
  const auto exact = retrieval::retrieve_knn(queries, gallery, top(10));
  for (const char* yaml : {"{name: faiss_flat}", "{name: faiss_ivf, args: {nlist: 16, nprobe: 16}}"}) {
    INFO(yaml);
    const auto found = backend(yaml)->search(queries, gallery, top(10));
    found.check_consistent();
    CHECK(found.n_gt == exact.n_gt);
    CHECK(found.offsets == exact.offsets);
    int64_t same = 0;
    for (int64_t q = 0; q < exact.num_queries(); ++q) same += list(found, q) == list(exact, q);
    // float32 distances may swap exact near-ties; the lists are otherwise the same
    CHECK(same >= exact.num_queries() - 2);
    for (std::size_t i = 0; i < found.distances.size(); ++i)
      CHECK(found.distances[i] == Approx(exact.distances[i]).epsilon(1e-4));
    CHECK(retrieval::measure_recall(found, queries, gallery, top(10), 150, 1).recall > 0.99);
  }
}

TEST_CASE("faiss_ivf's BLAS scan finds what Faiss's own scan of the same lists finds",
          "[retrieval][backends][faiss][ivf]") {
  if (refused_without_faiss("{name: faiss_ivf, args: {scan: faiss}}")) return;
  auto items = clustered(4000, 24, 80, 1.5, 13);
  for (int64_t i = 0; i < 4000; ++i) items.sequences.push_back(i / 4);
  for (const char* args : {"nlist: 64, nprobe: 4", "nlist: 40, nprobe: 1"}) {
    INFO(args);
    const std::string yaml = std::string("{name: faiss_ivf, args: {") + args;
    const auto faiss = backend(yaml + ", scan: faiss}}")->search(items, items, top(10));
    const auto blas = backend(yaml + "}}")->search(items, items, top(10));
    blas.check_consistent();
    // Same seed, same index, same probed lists: the same candidates. Faiss orders by its fp32
    // distances, the BLAS scan by exact ones, so only float near-ties may swap.
    CHECK(blas.offsets == faiss.offsets);
    int64_t same = 0;
    for (int64_t q = 0; q < blas.num_queries(); ++q) same += list(blas, q) == list(faiss, q);
    CHECK(same >= blas.num_queries() - 4);
    for (std::size_t i = 0; i < blas.distances.size(); ++i)
      CHECK(blas.distances[i] == Approx(faiss.distances[i]).epsilon(1e-4));
  }
  CHECK_THROWS_WITH(backend("{name: faiss_ivf, args: {scan: gpu}}"),
                    Contains("scan must be 'blas'") && Contains("got 'gpu'"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf_pq, args: {scan: blas}}"), Contains("scan"));
}

TEST_CASE("A backend asked for a GPU without GPU Faiss searches on the CPU alike",
          "[retrieval][backends][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  // This build's Faiss is Debian's CPU-only one: cuda_device (the run's GPU) changes nothing but a
  // log line. The GPU copy itself (OML_HAVE_FAISS_GPU) is written for CUDA builds, untested here.
  const auto items = clustered(1500, 16, 30, 1.0, 17);
  for (const char* yaml : {"{name: faiss_ivf}", "{name: faiss_ivf_pq}", "{name: faiss_flat}"}) {
    INFO(yaml);
    retrieval::BackendContext on_gpu;
    on_gpu.cuda_device = 0;
    const auto cpu = backend(yaml)->search(items, items, top(10));
    const auto asked_gpu =
        registries().retrieval_backends.create(spec_of(yaml), on_gpu)->search(items, items, top(10));
    CHECK(asked_gpu.offsets == cpu.offsets);
    CHECK(asked_gpu.retrieved == cpu.retrieved);
    CHECK(asked_gpu.distances == cpu.distances);
  }
}

TEST_CASE("Approximate backends never retrieve ignored pairs and reach high recall on clustered data",
          "[retrieval][backends][faiss]") {
  if (refused_without_faiss("{name: faiss_hnsw}")) return;
  auto items = clustered(3000, 32, 60, 1.0, 5);
  // Sequences of 3 consecutive ids: a query ignores the gallery items of its own sequence.
  for (int64_t i = 0; i < 3000; ++i) items.sequences.push_back(i / 3);
  const retrieval::IgnoredPairs ignored(items, items);
  for (const char* yaml : {"{name: faiss_ivf}", "{name: faiss_hnsw}", "{name: faiss_ivf_pq}"}) {
    INFO(yaml);
    const auto b = backend(yaml);
    CHECK_FALSE(b->exact());
    const auto found = b->search(items, items, top(10));
    found.check_consistent();
    for (int64_t q = 0; q < found.num_queries(); ++q) {
      CHECK(found.size(q) <= 10);
      for (const int64_t g : list(found, q)) REQUIRE_FALSE(ignored.contains(q, g));
      const auto ids = list(found, q);
      REQUIRE(std::set<int64_t>(ids.begin(), ids.end()).size() == ids.size());
    }
    const auto recall = retrieval::measure_recall(found, items, items, top(10), 500, 3);
    CHECK(recall.recall >= 0.95);
  }
}

TEST_CASE("Faiss args that do not fit the data fail with the limit before any search",
          "[retrieval][backends][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf_pq, args: {nbits: 8}}")) return;
  const auto items = clustered(100, 12, 5, 1.0, 6);
  CHECK_THROWS_AS(backend("{name: faiss_ivf, args: {nlist: 101}}")->search(items, items, top(5)),
                  ConfigError);
  CHECK_THROWS_WITH(backend("{name: faiss_ivf, args: {nlist: 101}}")->search(items, items, top(5)),
                    Contains("nlist 101 is larger than the gallery (100 items)"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf_pq, args: {m: 5}}")->search(items, items, top(5)),
                    Contains("m 5 does not divide the embedding dimension 12"));
  CHECK_THROWS_WITH(backend("{name: faiss_ivf_pq, args: {nbits: 8}}")->search(items, items, top(5)),
                    Contains("needs at least 256 gallery items"));
  // An exhaustive nlist works on the same data.
  CHECK(backend("{name: faiss_ivf, args: {nlist: 100, nprobe: 100}}")
            ->search(items, items, top(5))
            .num_queries() == 100);
}

TEST_CASE("Validation metrics with an approximate backend: recall reported, fnmr refused",
          "[retrieval][backends][metrics][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf, args: {nlist: 20, nprobe: 20}}")) return;
  const auto set = every_item_query_and_gallery(clustered(1000, 16, 40, 1.0, 8));
  const auto exact_backend = backend("{name: exact}");
  const auto ivf = backend("{name: faiss_ivf, args: {nlist: 20, nprobe: 20}}");
  metrics::EmbeddingMetricsOptions options;
  const auto document = config::Document::from_string("{cmc_top_k: [1, 5], map_top_k: [5]}", "m.yaml");
  options.metrics = metrics::configure_metrics(document.root());
  options.backend = exact_backend.get();
  const auto exact = metrics::compute_embedding_metrics(set, options);
  options.backend = ivf.get();
  options.report_recall = 300;
  const auto approximate = metrics::compute_embedding_metrics(set, options);
  CHECK(approximate.metrics.at("OVERALL/knn_recall/5") > 0.99);
  CHECK(approximate.metrics.at("OVERALL/cmc/1") == Approx(exact.metrics.at("OVERALL/cmc/1")).margin(0.01));
  CHECK(approximate.metrics.at("OVERALL/map/5") == Approx(exact.metrics.at("OVERALL/map/5")).margin(0.01));
  CHECK(exact.metrics.count("OVERALL/knn_recall/5") == 0);

  const auto with_fnmr = config::Document::from_string("{cmc_top_k: [1], fmr_vals: [0.1]}", "m.yaml");
  options.metrics = metrics::configure_metrics(with_fnmr.root());
  CHECK_THROWS_AS(metrics::compute_embedding_metrics(set, options), ConfigError);
  CHECK_THROWS_WITH(metrics::compute_embedding_metrics(set, options),
                    Contains("fnmr@fmr") && Contains("'exact'") && Contains("faiss_ivf"));
}

TEST_CASE("A Faiss backend answers a share of the queries as it answers them among all queries",
          "[retrieval][backends][faiss][ddp]") {
  // What the split over the ranks relies on (docs/ddp.md#the-k-nn-split-over-the-ranks): each rank
  // builds the index anew (the same index, deterministic_build) and searches its share alone.
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  const int threads = at::get_num_threads();
  auto queries = clustered(240, 16, 12, 1.0, 21, /*first_id=*/0);
  auto gallery = clustered(900, 16, 12, 1.0, 22, /*first_id=*/200);  // ids 200..239 shared: ignored
  for (int64_t i = 0; i < 240; ++i) queries.sequences.push_back(i % 5 == 0 ? -1 : i / 4);
  for (int64_t i = 0; i < 900; ++i) gallery.sequences.push_back(i % 5 == 0 ? -1 : i / 6);
  for (const char* yaml :
       {"{name: faiss_flat}", "{name: faiss_ivf}", "{name: faiss_ivf_pq}", "{name: faiss_hnsw}"}) {
    INFO(yaml);
    const auto b = backend(yaml);
    // HNSW inserts nodes concurrently: only one thread builds the same graph twice.
    const int build_threads = b->deterministic_build(2) ? threads : 1;
    CHECK(b->deterministic_build(1));
    CHECK(b->deterministic_build(2) == (b->name() != "faiss_hnsw"));
    at::set_num_threads(build_threads);
    const auto all = b->search(queries, gallery, top(10));
    for (int world : {2, 3}) {
      for (int rank = 0; rank < world; ++rank) {
        INFO("share " << rank << " of " << world);
        const auto range = retrieval::shard_of(240, rank, world);
        // The index of a fresh build, with one thread as on a rank of `num_threads: 1`.
        at::set_num_threads(1);
        const auto part = b->search(retrieval::slice_items(queries, range), gallery, top(10));
        at::set_num_threads(build_threads);
        REQUIRE(part.num_queries() == range.size());
        for (int64_t q = 0; q < range.size(); ++q) {
          REQUIRE(list(part, q) == list(all, range.begin + q));
          REQUIRE(std::equal(part.distances.begin() + part.begin(q), part.distances.begin() + part.end(q),
                             all.distances.begin() + all.begin(range.begin + q)));
          REQUIRE(part.n_gt[q] == all.n_gt[range.begin + q]);
        }
      }
    }
  }
  at::set_num_threads(threads);
}

TEST_CASE("target_recall chooses the search parameters that reach it, explicit ones win",
          "[retrieval][backends][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  // Many small classes (5 items each): a query's top 10 reaches into neighbouring classes, where
  // the fixed defaults (nlist 102, nprobe 6 here) lose neighbours.
  const auto items = clustered(4000, 32, 800, 1.0, 31);
  const auto recall_of = [&](const retrieval::RetrievalResults& found) {
    return retrieval::measure_recall(found, items, items, top(10), 1000, 7).recall;
  };
  for (const char* yaml : {"{name: faiss_ivf}", "{name: faiss_hnsw, args: {M: 16, ef_construction: 40}}",
                           "{name: faiss_ivf_pq}"}) {
    INFO(yaml);
    const auto b = backend(yaml);
    const auto found = b->search(items, items, top(10));
    const auto tuned = b->tuned_recall();
    REQUIRE(tuned.has_value());
    CHECK(tuned->k == 10);
    CHECK(tuned->queries == 1000);
    CHECK(tuned->recall >= 0.95);
    // Measured on the real queries (gallery items here too, another sample): near the target.
    CHECK(recall_of(found) >= 0.93);
  }

  // A higher target probes more lists and finds more.
  const auto strict = backend("{name: faiss_ivf, args: {target_recall: 0.995}}");
  const auto loose = backend("{name: faiss_ivf, args: {target_recall: 0.7}}");
  const double strict_recall = recall_of(strict->search(items, items, top(10)));
  const double loose_recall = recall_of(loose->search(items, items, top(10)));
  CHECK(strict_recall >= 0.98);
  CHECK(loose_recall < strict_recall);
  CHECK(loose->tuned_recall()->recall >= 0.7);

  // target_recall: 0 is the fixed default (nprobe = nlist / 16 = 6), and an explicit nprobe wins
  // over any target: the same lists, nothing tuned.
  const auto fixed = backend("{name: faiss_ivf, args: {target_recall: 0}}");
  const auto explicit_nprobe = backend("{name: faiss_ivf, args: {nprobe: 6, target_recall: 0.99}}");
  const auto a = fixed->search(items, items, top(10));
  const auto b = explicit_nprobe->search(items, items, top(10));
  CHECK(a.retrieved == b.retrieved);
  CHECK_FALSE(fixed->tuned_recall().has_value());
  CHECK_FALSE(explicit_nprobe->tuned_recall().has_value());
  CHECK(recall_of(a) < 0.95);  // what the fixed defaults lose on this data
  CHECK_THAT(explicit_nprobe->describe(), Contains("nprobe=6") && !Contains("target_recall"));
  CHECK_THAT(backend("{name: faiss_ivf}")->describe(),
             Contains("nprobe=by target_recall") && Contains("target_recall=0.95"));

  // Out of reach (1-bit codes, no re-ranking): every list probed, said, no error.
  const auto coarse =
      backend("{name: faiss_ivf_pq, args: {m: 2, nbits: 1, refine: 1, target_recall: 0.999}}");
  const auto found = coarse->search(items, items, top(10));
  CHECK(found.num_queries() == 4000);
  REQUIRE(coarse->tuned_recall().has_value());
  CHECK(coarse->tuned_recall()->recall < 0.999);
}

TEST_CASE("Validation metrics report the recall target_recall reached",
          "[retrieval][backends][metrics][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  oml::cli::register_builtins();  // the metric kinds configure_metrics reads
  const auto set = every_item_query_and_gallery(clustered(2000, 16, 400, 1.0, 32));
  const auto document = config::Document::from_string("{cmc_top_k: [1, 5], map_top_k: [5]}", "m.yaml");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metrics::configure_metrics(document.root());
  const auto exact_backend = backend("{name: exact}");
  options.backend = exact_backend.get();
  const auto exact = metrics::compute_embedding_metrics(set, options);
  const auto ivf = backend("{name: faiss_ivf}");
  options.backend = ivf.get();
  const auto tuned = metrics::compute_embedding_metrics(set, options);
  CHECK(tuned.metrics.at("OVERALL/knn_recall/5") == ivf->tuned_recall()->recall);
  CHECK(tuned.metrics.at("OVERALL/knn_recall/5") >= 0.95);
  CHECK(tuned.metrics.at("OVERALL/cmc/1") == Approx(exact.metrics.at("OVERALL/cmc/1")).margin(0.01));
  CHECK(tuned.metrics.at("OVERALL/map/5") == Approx(exact.metrics.at("OVERALL/map/5")).margin(0.01));
}

// --- gallery indexes (gallery_index.h): built once, searched, written, read, changed ------------

namespace {

// Same lists and distances (to float32 rounding of the same exact distances).
void check_same_results(const retrieval::RetrievalResults& a, const retrieval::RetrievalResults& b) {
  REQUIRE(a.num_queries() == b.num_queries());
  for (int64_t q = 0; q < a.num_queries(); ++q) {
    INFO("query " << q);
    REQUIRE(list(a, q) == list(b, q));
    for (int64_t i = 0; i < a.size(q); ++i) {
      CHECK(a.distances[a.begin(q) + i] == Approx(b.distances[b.begin(q) + i]).epsilon(1e-5));
    }
  }
}

// Queries that are not gallery items (ids no gallery item has).
retrieval::ItemSet new_queries(int64_t n, uint64_t seed) {
  retrieval::ItemSet q = clustered(n, 16, 50, 1.0, seed, /*first_id=*/1000000);
  return q;
}

const char* const kIndexKinds[] = {
    "{name: exact}",
    "{name: faiss_flat}",
    "{name: faiss_ivf, args: {nlist: 20}}",
    "{name: faiss_hnsw}",
    "{name: faiss_ivf_pq, args: {nlist: 20, m: 4, nbits: 6}}",
};

}  // namespace

TEST_CASE("A gallery index searches as its backend does, also once written and read back",
          "[retrieval][backends][gallery_index][faiss]") {
  const auto gallery = clustered(3000, 16, 50, 1.0, 51);
  const auto queries = new_queries(300, 52);
  oml::test::TempDir dir;
  for (const char* kind : kIndexKinds) {
    INFO(kind);
    if (std::string(kind) != "{name: exact}" && refused_without_faiss(kind)) continue;
    const auto b = backend(kind);
    const auto index = b->build_index(gallery, top(10));
    CHECK(index->size() == 3000);
    const auto searched = index->search(queries, top(10));
    // The backend's one-off search builds the same index (same seed) and chooses the same
    // parameters (target_recall measures on the gallery alone) — where builds are reproducible
    // (HNSW's threads insert concurrently).
    if (b->deterministic_build(at::get_num_threads())) {
      check_same_results(searched, b->search(queries, gallery, top(10)));
    }

    const std::filesystem::path file = dir / "index.faiss";
    std::filesystem::remove(file);
    const bool wrote = index->write(file);
    // exact and faiss_flat keep no file: their embeddings are their index.
    CHECK(wrote == (std::string(kind) != "{name: exact}" && std::string(kind) != "{name: faiss_flat}"));
    const auto read =
        b->load_index(gallery, wrote ? file : std::filesystem::path(), index->search_parameters());
    CHECK(read->search_parameters() == index->search_parameters());
    check_same_results(read->search(queries, top(10)), searched);
  }
}

TEST_CASE("A gallery index changed by add and remove searches like one over the changed gallery",
          "[retrieval][backends][gallery_index][faiss]") {
  const auto gallery = clustered(2000, 16, 50, 1.0, 61);
  const auto more = clustered(500, 16, 50, 1.0, 62, /*first_id=*/2000);
  const auto queries = new_queries(200, 63);
  // The changed gallery: the first 2000 items without every 7th, then the 500 new ones.
  std::vector<int64_t> removed;
  for (int64_t i = 0; i < 2000; i += 7) removed.push_back(i);
  std::vector<int64_t> kept_rows;
  for (int64_t i = 0; i < 2500; ++i) {
    if (i >= 2000 || i % 7 != 0) kept_rows.push_back(i);
  }
  const auto all = [&] {
    retrieval::ItemSet s = gallery;
    s.embeddings = torch::cat({gallery.embeddings, more.embeddings});
    s.labels.insert(s.labels.end(), more.labels.begin(), more.labels.end());
    s.ids.insert(s.ids.end(), more.ids.begin(), more.ids.end());
    return s;
  }();
  retrieval::ItemSet changed;
  changed.embeddings = all.embeddings.index_select(0, torch::tensor(kept_rows, torch::kLong));
  for (const int64_t i : kept_rows) {
    changed.labels.push_back(all.labels[i]);
    changed.ids.push_back(all.ids[i]);
  }
  const auto exact = retrieval::retrieve_knn(queries, changed, top(10));
  // Every list probed, every candidate re-ranked, a wide HNSW search: the changed structures must
  // give the exact lists, so a wrong position anywhere shows.
  const char* const complete[] = {
      "{name: exact}",
      "{name: faiss_flat}",
      "{name: faiss_ivf, args: {nlist: 20, nprobe: 20}}",
      "{name: faiss_hnsw, args: {M: 48, ef_construction: 200, ef_search: 2500}}",
      "{name: faiss_ivf_pq, args: {nlist: 20, nprobe: 20, m: 8, nbits: 8, refine: 64}}",
  };
  for (const char* kind : complete) {
    INFO(kind);
    if (std::string(kind) != "{name: exact}" && refused_without_faiss(kind)) continue;
    const auto b = backend(kind);
    // Both orders: remove then add, and add then remove (the removed positions are the same);
    // and in pieces, as a server takes them: adds of 100 items (most of them into the room the
    // first one made), removals in three batches (later ones in place).
    for (const int order : {0, 1, 2}) {
      INFO("order " << order);
      auto index = b->build_index(gallery, top(10));
      if (order == 1) index->add(more);
      if (order == 2) {
        for (int64_t first = 0; first < 500; first += 100) {
          retrieval::ItemSet piece;
          piece.embeddings = more.embeddings.narrow(0, first, 100);
          piece.labels.assign(more.labels.begin() + first, more.labels.begin() + first + 100);
          piece.ids.assign(more.ids.begin() + first, more.ids.begin() + first + 100);
          index->add(piece);
        }
        // Every third removed row per batch, each at its position after the earlier batches.
        for (int batch = 2; batch >= 0; --batch) {
          std::vector<int64_t> part;
          for (std::size_t i = 0; i < removed.size(); ++i) {
            if (static_cast<int>(i % 3) == batch) part.push_back(removed[i]);
          }
          std::vector<int64_t> positions;
          for (const int64_t row : part) {
            // The row's position now: the rows before it that earlier batches removed are gone.
            int64_t gone = 0;
            for (std::size_t i = 0; i < removed.size(); ++i) {
              if (static_cast<int>(i % 3) > batch && removed[i] < row) ++gone;
            }
            positions.push_back(row - gone);
          }
          index->remove(positions);
        }
      } else {
        index->remove(removed);
        if (order == 0) index->add(more);
      }
      REQUIRE(index->size() == static_cast<int64_t>(kept_rows.size()));
      CHECK(index->gallery().ids == changed.ids);
      CHECK(torch::equal(index->gallery().embeddings, changed.embeddings));
      check_same_results(index->search(queries, top(10)), exact);
      CHECK(b->build_index(gallery, top(10))->remove_updates() ==
            (std::string(kind).find("hnsw") != std::string::npos ? retrieval::IndexUpdates::kRebuild
                                                                 : retrieval::IndexUpdates::kIncremental));
    }
  }
}

TEST_CASE("A faiss_ivf index keeps its lists' scan between searches and makes it again on add and remove",
          "[retrieval][backends][gallery_index][faiss]") {
  // 3 of 20 lists probed: the lists searched are the index's own, so a scan kept from before a
  // change (stale list sizes or norms, or pointers into moved lists) would differ from the same
  // index read back from its file, whose scan is made anew.
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  const auto gallery = clustered(2000, 16, 50, 1.0, 91);
  const auto more = clustered(500, 16, 50, 1.0, 92, /*first_id=*/2000);
  const auto queries = new_queries(200, 93);
  std::vector<int64_t> removed;
  for (int64_t i = 0; i < 2500; i += 5) removed.push_back(i);
  oml::test::TempDir dir;
  const auto b = backend("{name: faiss_ivf, args: {nlist: 20, nprobe: 3}}");
  const auto index = b->build_index(gallery, top(10));
  const auto read_back = [&](const char* name) {
    REQUIRE(index->write(dir / name));
    return b->load_index(index->gallery(), dir / name, index->search_parameters());
  };
  const auto searched = index->search(queries, top(10));
  check_same_results(searched, read_back("built.index")->search(queries, top(10)));
  check_same_results(index->search(queries, top(10)), searched);  // the kept scan, searched again
  index->add(more);
  check_same_results(index->search(queries, top(10)), read_back("added.index")->search(queries, top(10)));
  index->remove(removed);
  REQUIRE(index->size() == 2000);
  const auto changed = index->search(queries, top(10));
  check_same_results(changed, read_back("removed.index")->search(queries, top(10)));
  // Searches share the kept scan: four threads at once find what one finds alone.
  std::vector<retrieval::RetrievalResults> concurrent(4);
  std::vector<std::thread> threads;
  for (auto& out : concurrent) threads.emplace_back([&] { out = index->search(queries, top(10)); });
  for (auto& t : threads) t.join();
  for (const auto& out : concurrent) check_same_results(out, changed);
}

TEST_CASE("A gallery index refuses a file that is not its own and added rows of another size",
          "[retrieval][backends][gallery_index][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  const auto gallery = clustered(1000, 16, 20, 1.0, 71);
  oml::test::TempDir dir;
  const auto hnsw = backend("{name: faiss_hnsw}")->build_index(gallery, top(5));
  REQUIRE(hnsw->write(dir / "hnsw.index"));
  const auto ivf = backend("{name: faiss_ivf}");
  CHECK_THROWS_WITH(ivf->load_index(gallery, dir / "hnsw.index", {}),
                    Contains("hnsw.index") && Contains("another kind of Faiss index"));
  const auto fewer = clustered(900, 16, 20, 1.0, 71);
  CHECK_THROWS_WITH(backend("{name: faiss_hnsw}")->load_index(fewer, dir / "hnsw.index", {}),
                    Contains("holds 1000 vectors of dimension 16, the gallery has 900"));
  oml::test::write_file(dir / "junk.index", "not an index");
  CHECK_THROWS_AS(ivf->load_index(gallery, dir / "junk.index", {}), DataError);
  CHECK_THROWS_WITH(ivf->load_index(gallery, {}, {}), Contains("none was given"));
  const auto wide = clustered(10, 8, 2, 1.0, 72, 5000);
  CHECK_THROWS_WITH(hnsw->add(wide), Contains("dimension 8") && Contains("16"));
  CHECK_THROWS_WITH(hnsw->remove({1000}), Contains("position 1000 is not in the gallery of 1000"));
}

// tests/fixtures/faiss_damage.cpp: `what` done to the index at `in`, written to `out`.
void damage_faiss_index(const std::filesystem::path& in, const std::filesystem::path& out,
                        const std::string& what) {
  static void* library = dlopen(oml::test::fixture_path("libfaiss_damage.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(library != nullptr);
  using Damage = int (*)(const char*, const char*, const char*, char*, unsigned long);
  const auto fn = reinterpret_cast<Damage>(dlsym(library, "oml_test_damage_faiss_index"));
  REQUIRE(fn != nullptr);
  char error[512] = {};
  INFO(what << ": " << error);
  REQUIRE(fn(in.c_str(), out.c_str(), what.c_str(), error, sizeof(error)) == 0);
}

TEST_CASE("A damaged Faiss index is refused before a search reads it, and ef_search is bounded by the graph",
          "[retrieval][backends][gallery_index][faiss]") {
  if (refused_without_faiss("{name: faiss_hnsw}")) return;
  const auto gallery = clustered(300, 8, 10, 1.0, 73);
  const auto queries = clustered(20, 8, 10, 1.0, 74, 1000);
  oml::test::TempDir dir;
  const auto hnsw = backend("{name: faiss_hnsw}");
  const auto ivf = backend("{name: faiss_ivf, args: {nlist: 4}}");
  REQUIRE(hnsw->build_index(gallery, top(5))->write(dir / "hnsw.index"));
  REQUIRE(ivf->build_index(gallery, top(5))->write(dir / "ivf.index"));
  // The files as written load (every check passes on a real index).
  CHECK(hnsw->load_index(gallery, dir / "hnsw.index", {})->size() == 300);
  CHECK(ivf->load_index(gallery, dir / "ivf.index", {})->size() == 300);
  // Each of these crashed the first search (SIGSEGV), read past the gallery or hid an item.
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"hnsw entry point past the end", "entry point 1000000 is outside 0..299"},
      {"hnsw entry point negative", "entry point -7"},
      {"hnsw top level too high", "top level is 50"},
      {"hnsw offset past the neighbours", "node 136 has offsets"},
      {"hnsw neighbour past the end", "neighbour 1073741824 outside 0..299"},
      {"hnsw node level too high", "node 3 has level 40"},
      {"ivf id past the end", "holds id 100000, outside 0..299"},
      {"ivf id twice", "is in the lists twice"},
  };
  for (const auto& [what, says] : damages) {
    const bool of_hnsw = what.rfind("hnsw", 0) == 0;
    const auto file = dir / (what + ".index");
    damage_faiss_index(dir / (of_hnsw ? "hnsw.index" : "ivf.index"), file, what);
    INFO(what);
    CHECK_THROWS_WITH((of_hnsw ? hnsw : ivf)->load_index(gallery, file, {}),
                      Contains(file.string() + ": corrupt Faiss index: ") && Contains(says));
  }
  // Faiss's reader checks the vectors' size itself.
  damage_faiss_index(dir / "hnsw.index", dir / "short.index", "hnsw vectors short");
  CHECK_THROWS_WITH(hnsw->load_index(gallery, dir / "short.index", {}),
                    Contains("short.index: not a Faiss index file Faiss can read"));
  // ef_search from a manifest: 10^11 aborted in Faiss's allocation; beyond the graph's size
  // (or 128) it explores no more, so it is taken as that.
  const auto wide = hnsw->load_index(gallery, dir / "hnsw.index", {{"ef_search", 100000000000}});
  CHECK(wide->search_parameters().at("ef_search") == 300);
  // The same bound where the file itself holds it and the manifest names none.
  damage_faiss_index(dir / "hnsw.index", dir / "ef.index", "hnsw ef_search huge");
  CHECK(hnsw->load_index(gallery, dir / "ef.index", {})->search_parameters().at("ef_search") == 300);
  check_same_results(
      wide->search(queries, top(5)),
      hnsw->load_index(gallery, dir / "hnsw.index", {{"ef_search", 300}})->search(queries, top(5)));
}

TEST_CASE("An index emptied by remove loads without a file and builds again on its next add",
          "[retrieval][backends][gallery_index][faiss]") {
  if (refused_without_faiss("{name: faiss_ivf}")) return;
  const auto gallery = clustered(300, 8, 10, 1.0, 75);
  const auto queries = clustered(5, 8, 10, 1.0, 76, 1000);
  for (const std::string yaml : {"{name: faiss_ivf, args: {nlist: 4}}", "{name: faiss_hnsw}"}) {
    INFO(yaml);
    const auto b = backend(yaml);
    auto index = b->build_index(gallery, top(5));
    std::vector<int64_t> all(300);
    std::iota(all.begin(), all.end(), 0);
    index->remove(all);
    oml::test::TempDir dir;
    CHECK_FALSE(index->write(dir / "empty.index"));  // nothing to write: the manifest says so
    auto loaded = b->load_index(index->gallery(), {}, index->search_parameters());
    CHECK(loaded->size() == 0);
    CHECK(loaded->search(queries, top(3)).offsets == std::vector<int64_t>(6, 0));
    loaded->add(gallery);
    CHECK(loaded->size() == 300);
    CHECK(loaded->search(queries, top(3)).offsets.back() == 15);
  }
  // A gallery that is not empty still needs its file.
  CHECK_THROWS_WITH(backend("{name: faiss_ivf}")->load_index(gallery, {}, {}), Contains("none was given"));
}

TEST_CASE("The open-set threshold holds its false match rate on a held-out set",
          "[retrieval][metrics][open_set]") {
  // 60 classes; 3000 items calibrate, 2 x 8000 more (the same classes) make 8000 held-out pairs
  // of two independent items each, so that the held-out matches are binomial.
  const auto all = clustered(19000, 16, 60, 1.5, 81);
  retrieval::ItemSet calibration;
  calibration.embeddings = all.embeddings.narrow(0, 0, 3000).contiguous();
  calibration.labels.assign(all.labels.begin(), all.labels.begin() + 3000);
  calibration.ids.assign(all.ids.begin(), all.ids.begin() + 3000);
  const at::Tensor a = all.embeddings.narrow(0, 3000, 8000).to(torch::kDouble);
  const at::Tensor b = all.embeddings.narrow(0, 11000, 8000).to(torch::kDouble);
  const at::Tensor pair_distance = (a - b).norm(2, 1);
  for (const double fmr : {0.001, 0.01, 0.1}) {
    INFO("fmr " << fmr);
    const metrics::OpenSetThreshold t = metrics::calibrate_open_set(calibration, fmr);
    // On its own set, over every ordered pair of different items: fnmr@fmr's definition.
    const at::Tensor d =
        torch::cdist(calibration.embeddings.to(torch::kDouble), calibration.embeddings.to(torch::kDouble));
    const at::Tensor labels = torch::tensor(calibration.labels, torch::kLong);
    const at::Tensor same = labels.unsqueeze(0) == labels.unsqueeze(1);
    const at::Tensor other = ~torch::eye(3000, torch::kBool);
    const at::Tensor negative = other & ~same;
    const at::Tensor positive = other & same;
    const double n_negative = negative.sum().item<double>();
    CHECK(t.negative_pairs == static_cast<int64_t>(n_negative));
    CHECK(t.positive_pairs == positive.sum().item<int64_t>());
    // T lies between the two negative distances around the quantile (each pair counted twice).
    CHECK((negative & (d < t.threshold)).sum().item<double>() / n_negative ==
          Approx(fmr).margin(4.0 / n_negative));
    CHECK((positive & (d >= t.threshold)).sum().item<double>() / positive.sum().item<double>() ==
          Approx(t.fnmr).margin(1e-12));
    // Held out: the share of independent negative pairs matched lies in the 99.9 % binomial
    // interval of the target.
    int64_t n_out = 0;
    int64_t matched = 0;
    for (int64_t i = 0; i < 8000; ++i) {
      if (all.labels[3000 + i] == all.labels[11000 + i]) continue;
      ++n_out;
      matched += pair_distance[i].item<double>() < t.threshold;
    }
    const double measured = static_cast<double>(matched) / static_cast<double>(n_out);
    CHECK(std::abs(measured - fmr) <= 3.29 * std::sqrt(fmr * (1.0 - fmr) / static_cast<double>(n_out)));
  }
  retrieval::ItemSet one_label = calibration;
  std::fill(one_label.labels.begin(), one_label.labels.end(), 3);
  CHECK_THROWS_WITH(metrics::calibrate_open_set(one_label, 0.01), Contains("single label"));
  CHECK_THROWS_AS(metrics::calibrate_open_set(calibration, 0.0), UsageError);
}

// The retrieval distances (oml/retrieval/distance_space.h): every list and value against a
// brute-force ranking in double precision of the kind's own formula.
TEST_CASE("Retrieval by squared Euclidean, cosine and dot distance: the brute-force lists and values",
          "[retrieval][distance]") {
  oml::cli::register_builtins();
  const auto items = clustered(300, 12, 15, 2.0, 21);
  const auto set = every_item_query_and_gallery(items);
  const auto document = config::Document::from_string("{cmc_top_k: [1, 5], map_top_k: [5]}", "m.yaml");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metrics::configure_metrics(document.root());
  const auto raw = items.embeddings.to(torch::kDouble);
  const auto unit = raw / raw.norm(2, {1}, true);
  const std::vector<std::pair<DistanceKind, torch::Tensor>> kinds{
      {DistanceKind::squared_euclidean, torch::cdist(raw, raw).pow(2)},
      {DistanceKind::cosine, 1.0 - torch::mm(unit, unit.t())},
      {DistanceKind::dot, -torch::mm(raw, raw.t())},  // the negated inner product, smaller is closer
  };
  for (const auto& [kind, all] : kinds) {
    INFO(to_string(kind));
    options.distance = kind;
    const auto result = metrics::compute_embedding_metrics(set, options).retrieval;
    const auto matrix = all.clone();
    matrix.fill_diagonal_(std::numeric_limits<double>::infinity());  // never the query itself
    const auto [expected_values, expected_positions] = matrix.topk(5, 1, /*largest=*/false);
    for (int64_t q = 0; q < 300; ++q) {
      REQUIRE(result.size(q) == 5);
      for (int64_t i = 0; i < 5; ++i) {
        CHECK(result.retrieved[result.begin(q) + i] == expected_positions[q][i].item<int64_t>());
        CHECK(result.distances[result.begin(q) + i] ==
              Approx(expected_values[q][i].item<double>()).margin(1e-5).epsilon(1e-5));
      }
    }
  }
  // Squared Euclidean orders as Euclidean does: the same lists and metrics.
  options.distance = DistanceKind::euclidean;
  const auto euclidean = metrics::compute_embedding_metrics(set, options);
  options.distance = DistanceKind::squared_euclidean;
  const auto squared = metrics::compute_embedding_metrics(set, options);
  CHECK(euclidean.retrieval.retrieved == squared.retrieval.retrieved);
  CHECK(euclidean.metrics == squared.metrics);
}

TEST_CASE("A Faiss backend retrieves by cosine and dot distance as exact search does",
          "[retrieval][distance][faiss]") {
  oml::cli::register_builtins();
  if (refused_without_faiss("{name: faiss_flat}")) return;
  const auto set = every_item_query_and_gallery(clustered(800, 16, 30, 1.5, 22));
  const auto document = config::Document::from_string("{cmc_top_k: [1, 5], map_top_k: [5]}", "m.yaml");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metrics::configure_metrics(document.root());
  for (const auto kind : {DistanceKind::cosine, DistanceKind::dot})
    for (const std::string yaml :
         {"{name: faiss_flat}", "{name: faiss_ivf, args: {nlist: 16, nprobe: 16}}"}) {
      INFO(yaml << " by " << to_string(kind));
      options.distance = kind;
      options.backend = nullptr;
      const auto exact = metrics::compute_embedding_metrics(set, options);
      const auto faiss = backend(yaml);
      options.backend = faiss.get();
      const auto found = metrics::compute_embedding_metrics(set, options);
      CHECK(found.retrieval.retrieved == exact.retrieval.retrieved);
      for (std::size_t i = 0; i < exact.retrieval.distances.size(); ++i) {
        CHECK(found.retrieval.distances[i] ==
              Approx(exact.retrieval.distances[i]).margin(1e-5).epsilon(1e-6));
      }
      CHECK(found.metrics.at("OVERALL/cmc/1") == exact.metrics.at("OVERALL/cmc/1"));
    }
}

TEST_CASE("A cosine threshold is a cosine distance, and retrieval takes every distance kind",
          "[retrieval][distance][config]") {
  oml::cli::register_builtins();
  // constant_thresholding keeps the items closer than th, in the configured distance's units.
  const auto set = every_item_query_and_gallery(clustered(200, 8, 10, 1.0, 23));
  const auto document = config::Document::from_string("{cmc_top_k: [1, 5]}", "m.yaml");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metrics::configure_metrics(document.root());
  options.distance = DistanceKind::cosine;
  const auto threshold = retrieval::make_constant_thresholding({0.01});
  options.postprocessor = threshold.get();
  const auto kept = metrics::compute_embedding_metrics(set, options).retrieval;
  REQUIRE(!kept.distances.empty());
  for (const float d : kept.distances) CHECK(d < 0.01F);

  const auto config = [](const std::string& backend_yaml) {
    const auto doc = config::Document::from_string(
        "dataset_root: /data\nretrieval_backend: " + backend_yaml + "\n", "run.yaml");
    return config::parse_run_config(doc.root());
  };
  CHECK(config("{name: exact, distance: cosine}").retrieval_distance == DistanceKind::cosine);
  CHECK(config("{name: exact}").retrieval_distance == DistanceKind::euclidean);
  CHECK(config("{name: faiss_ivf, distance: dot}").retrieval_distance == DistanceKind::dot);
  CHECK_THROWS_WITH(config("{name: faiss_ivf, distance: angular}"),
                    Contains("run.yaml:2:48") &&
                        Contains("expected euclidean, squared_euclidean, cosine, dot, got 'angular'"));
}

// distance: dot — the negated inner product -q.g, searched natively (knn.h's Measure): exact k-NN
// on blocks of -q.g, Faiss's inner-product indexes.
namespace {

// Every ordered pair of different items split by label: -q.g in double precision.
void dot_pairs(const retrieval::ItemSet& items, std::vector<double>& positive,
               std::vector<double>& negative) {
  const auto dots = torch::mm(items.embeddings.to(torch::kDouble), items.embeddings.to(torch::kDouble).t());
  const auto n = static_cast<int64_t>(items.labels.size());
  const auto values = dots.accessor<double, 2>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (i == j) continue;
      (items.labels[i] == items.labels[j] ? positive : negative).push_back(-values[i][j]);
    }
  }
}

retrieval::KnnOptions dot_top(int64_t k) {
  retrieval::KnnOptions options = top(k);
  options.measure = retrieval::Measure::negative_dot;
  return options;
}

}  // namespace

TEST_CASE("fnmr@fmr and the open-set threshold under dot are the quantiles of -q.g",
          "[retrieval][distance][metrics]") {
  oml::cli::register_builtins();
  const auto items = clustered(240, 8, 6, 1.5, 24);
  std::vector<double> positive, negative;
  dot_pairs(items, positive, negative);
  const std::vector<double> fmr_vals{0.01, 0.1, 0.5};
  const auto expected = metrics::fnmr_at_fmr(positive, negative, fmr_vals);
  const auto document = config::Document::from_string("{fmr_vals: [0.01, 0.1, 0.5]}", "m.yaml");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metrics::configure_metrics(document.root());
  options.distance = DistanceKind::dot;
  const auto result = metrics::compute_embedding_metrics(every_item_query_and_gallery(items), options);
  // Float rounding of a pair's value may move one positive across T.
  const double one_pair = 1.0 / static_cast<double>(positive.size()) + 1e-12;
  CHECK(result.metrics.at("OVERALL/fnmr@fmr/0.01") == Approx(expected[0]).margin(one_pair));
  CHECK(result.metrics.at("OVERALL/fnmr@fmr/0.1") == Approx(expected[1]).margin(one_pair));
  CHECK(result.metrics.at("OVERALL/fnmr@fmr/0.5") == Approx(expected[2]).margin(one_pair));

  // The threshold is a -q.g (negative here: the clusters lie far from the origin), interpolated
  // between the neighbouring negatives' -q.g as numpy.quantile does.
  const auto t = metrics::calibrate_open_set(items, 0.1, retrieval::Measure::negative_dot);
  const double quantile = metrics::quantile_linear(negative, 0.1);
  CHECK(t.threshold == Approx(quantile).margin(1e-4).epsilon(1e-5));
  CHECK(t.fnmr == Approx(expected[1]).margin(one_pair));
  CHECK(t.positive_pairs == static_cast<int64_t>(positive.size()));
  CHECK(t.negative_pairs == static_cast<int64_t>(negative.size()));
}

TEST_CASE("The approximate Faiss backends search by dot with inner-product indexes",
          "[retrieval][distance][faiss]") {
  oml::cli::register_builtins();
  if (refused_without_faiss("{name: faiss_hnsw}")) return;
  // Queries from the gallery's own clusters (target_recall is measured on gallery items as queries,
  // so it speaks for queries like them), none of them a gallery item.
  const auto items = clustered(3200, 16, 50, 1.0, 25);
  const auto gallery = retrieval::slice_items(items, {0, 3000});
  const auto queries = retrieval::slice_items(items, {3000, 3200});
  const auto exact = retrieval::retrieve_knn(queries, gallery, dot_top(10));
  const auto dots =
      torch::mm(queries.embeddings.to(torch::kDouble), gallery.embeddings.to(torch::kDouble).t());
  for (const char* yaml :
       {"{name: faiss_ivf, args: {nlist: 20}}", "{name: faiss_ivf, args: {nlist: 20, scan: faiss}}",
        "{name: faiss_hnsw}", "{name: faiss_ivf_pq, args: {nlist: 20, m: 4, nbits: 6}}"}) {
    INFO(yaml);
    const auto b = backend(yaml);
    REQUIRE(b->supports(retrieval::Measure::negative_dot));
    const auto found = b->search(queries, gallery, dot_top(10));
    found.check_consistent();
    // Each distance is the pair's -q.g (Faiss's own scan reports its float value).
    for (int64_t q = 0; q < found.num_queries(); ++q) {
      for (int64_t j = found.begin(q); j < found.end(q); ++j) {
        CHECK(found.distances[j] ==
              Approx(-dots[q][found.retrieved[j]].item<double>()).margin(1e-4).epsilon(1e-5));
      }
    }
    // target_recall chose the search parameters for the inner product as for Euclidean distances.
    const auto tuned = b->tuned_recall();
    REQUIRE(tuned.has_value());
    CHECK(tuned->recall >= 0.95);
    double recall = 0.0;
    for (int64_t q = 0; q < found.num_queries(); ++q) {
      const std::set<int64_t> got(found.retrieved.begin() + found.begin(q),
                                  found.retrieved.begin() + found.end(q));
      int64_t hits = 0;
      for (int64_t j = exact.begin(q); j < exact.end(q); ++j)
        hits += static_cast<int64_t>(got.count(exact.retrieved[j]));
      recall += static_cast<double>(hits) / static_cast<double>(exact.size(q));
    }
    CHECK(recall / static_cast<double>(found.num_queries()) >= 0.9);
  }
}

TEST_CASE("A gallery index by dot searches as its backend does, also written and read back",
          "[retrieval][distance][gallery_index][faiss]") {
  const auto gallery = clustered(2000, 16, 40, 1.0, 27);
  const auto queries = new_queries(150, 28);
  oml::test::TempDir dir;
  const auto exact = retrieval::retrieve_knn(queries, gallery, dot_top(10));
  for (const char* kind : kIndexKinds) {
    INFO(kind);
    if (std::string(kind) != "{name: exact}" && refused_without_faiss(kind)) continue;
    const auto b = backend(kind);
    const auto index = b->build_index(gallery, dot_top(10));
    const auto searched = index->search(queries, dot_top(10));
    if (std::string(kind) == "{name: exact}" || std::string(kind) == "{name: faiss_flat}") {
      check_same_results(searched, exact);
    }
    const std::filesystem::path file = dir / "dot.index";
    std::filesystem::remove(file);
    const bool wrote = index->write(file);
    const auto read = b->load_index(gallery, wrote ? file : std::filesystem::path(),
                                    index->search_parameters(), retrieval::Measure::negative_dot);
    check_same_results(read->search(queries, dot_top(10)), searched);
    if (wrote) {  // an inner-product index read back for a Euclidean search is refused
      CHECK_THROWS_WITH(b->load_index(gallery, file, index->search_parameters()),
                        Contains("holds an index for inner-product (distance: dot) search"));
    }
  }
}

}  // namespace retrieval_backend_tests
