// pytorch-metric-learning's AccuracyCalculator metrics (docs/metrics.md): their formulas on
// hand-made lists, NMI and AMI against scikit-learn, and whole validations against PML itself:
// tests/python/pml_accuracy_reference.py runs AccuracyCalculator (Faiss k-NN and k-means) on
// random sets, clustered sets with exact distance ties, separate query/gallery sets and sets with
// categories, and oml-cpp's validation of the same rows must agree to 1e-6.
#include <torch/torch.h>

#include <cmath>

#include "oml/config/document.h"
#include "oml/io/torch_file.h"
#include "oml/metrics/accuracy_calculator.h"
#include "oml/metrics/clustering.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/embedding_sets.h"
#include "support/support.h"

namespace pml_metrics_tests {

using namespace oml;
using Catch::Matchers::Contains;

namespace {

// The reference's order of values (METRICS in pml_accuracy_reference.py) and oml-cpp's keys.
const std::vector<std::string> kKnnMetrics{"precision_at_1", "r_precision", "mean_average_precision_at_r",
                                           "mrr"};
const std::vector<std::string> kClusteringMetrics{"nmi", "ami"};
constexpr const char* kKnnArgs =
    "{precision_at_1: true, r_precision: true, mean_average_precision_at_r: true, mrr: true}";
constexpr const char* kClusteringArgs = "{NMI: true, AMI: true}";  // PML's names

metrics::MetricTable metric_table(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto document = config::Document::from_string("metric_args: " + yaml + "\n", "metrics.yaml");
  return metrics::configure_metrics(document.root()["metric_args"]);
}

const std::filesystem::path& references() {
  return test::reference_export("pml_accuracy_reference.py", "export");
}

template <class T>
std::vector<T> values_of(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.contiguous();
  return std::vector<T>(flat.data_ptr<T>(), flat.data_ptr<T>() + flat.numel());
}

// The rows of reference case `name`, with categories when it has them.
metrics::EmbeddingSet reference_set(const std::filesystem::path& dir, const std::string& name) {
  auto load = [&](const std::string& what) { return io::load_tensor(dir / (name + "_" + what + ".pt")); };
  metrics::EmbeddingSet set;
  set.embeddings = load("embeddings").to(torch::kFloat32);
  set.labels = values_of<int64_t>(load("labels"));
  set.is_query = values_of<uint8_t>(load("is_query"));
  set.is_gallery = values_of<uint8_t>(load("is_gallery"));
  if (std::filesystem::exists(dir / (name + "_categories.pt"))) {
    for (const int64_t category : values_of<int64_t>(load("categories")))
      set.categories.push_back("category" + std::to_string(category));
  }
  return set;
}

// Validates case `name` with `metric_args` and compares `keys` (PML's values at `first` on) with
// PML's, overall and, for a case with categories, per category.
void check_case(const std::filesystem::path& dir, const std::string& name, const std::string& metric_args,
                const std::vector<std::string>& keys, int64_t first, double memory_budget_mb = 128,
                DistanceKind distance = DistanceKind::euclidean) {
  INFO("case " << name << ", memory budget " << memory_budget_mb << " MB, distance " << to_string(distance));
  const metrics::EmbeddingSet set = reference_set(dir, name);
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table(metric_args);
  options.memory_budget_mb = memory_budget_mb;
  options.distance = distance;
  const auto result = metrics::compute_embedding_metrics(set, options);
  const auto expected = values_of<double>(io::load_tensor(dir / (name + "_values.pt")));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO(keys[i]);
    CHECK(result.metrics.at("OVERALL/" + keys[i]) == Approx(expected[first + i]).margin(1e-6));
  }
  if (set.categories.empty()) return;
  const auto per_category = io::load_tensor(dir / (name + "_category_values.pt"));
  for (int64_t c = 0; c < per_category.size(0); ++c) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::string key = "category" + std::to_string(c) + "/" + keys[i];
      INFO(key);
      CHECK(result.metrics.at(key) ==
            Approx(per_category[c][first + static_cast<int64_t>(i)].item<double>()).margin(1e-6));
    }
  }
}

std::vector<std::string> reference_cases() {
  std::vector<std::string> cases;
  for (const std::string kind : {"random", "ties", "split", "categories"}) {
    for (int seed = 0; seed < 3; ++seed) cases.push_back(kind + "_" + std::to_string(seed));
  }
  return cases;
}

}  // namespace

TEST_CASE("The AccuracyCalculator k-NN metrics follow their formulas on hand-made lists", "[metrics]") {
  metrics::QueryHits hits;
  hits.add_query({1, 0, 1, 0, 0}, 3);  // hits at ranks 1 and 3 of R = 3
  hits.add_query({0, 0, 1, 1}, 1);     // R = 1: its one relevant item at rank 3
  hits.add_query({0, 1}, 0);           // no ground truth: PML's lone query, no value
  hits.add_query({0, 1, 1}, 4);        // a list shorter than R: the missing items count as misses
  const auto p1 = metrics::precision_at_1(hits);
  const auto rp = metrics::r_precision(hits);
  const auto map = metrics::map_at_r(hits);
  CHECK(p1[0] == 1.0);
  CHECK(p1[1] == 0.0);
  CHECK(rp[0] == Approx(2.0 / 3));
  CHECK(rp[1] == 0.0);
  CHECK(rp[3] == Approx(2.0 / 4));
  CHECK(map[0] == Approx((1.0 + 2.0 / 3) / 3));
  CHECK(map[1] == 0.0);  // the hit at rank 3 is beyond R = 1
  CHECK(map[3] == Approx((1.0 / 2 + 2.0 / 3) / 4));
  CHECK(metrics::max_ground_truth(hits) == 4);
  const auto rr = metrics::reciprocal_rank(hits, 4);
  CHECK(rr[0] == 1.0);
  CHECK(rr[1] == Approx(1.0 / 3));
  CHECK(rr[3] == Approx(1.0 / 2));
  CHECK(metrics::reciprocal_rank(hits, 2)[1] == 0.0);  // the first hit lies beyond the depth
  for (const auto& values : {p1, rp, map, rr}) CHECK(std::isnan(values[2]));
  // Means leave the lone query out; a group of lone queries alone has no value.
  CHECK(metrics::mean_with_ground_truth(p1, {0, 1, 2, 3}) == Approx(1.0 / 3));
  CHECK(std::isnan(metrics::mean_with_ground_truth(p1, {2})));
}

TEST_CASE("NMI and AMI equal scikit-learn's, edge cases included", "[metrics]") {
  // normalized_mutual_info_score / adjusted_mutual_info_score of scikit-learn 1.9.1.
  const std::vector<int64_t> labels{0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3};
  const std::vector<int64_t> clusters{5, 5, 1, 1, 1, 7, 7, 7, 2, 2, 2};
  CHECK(metrics::normalized_mutual_info(labels, clusters) == Approx(0.580128667549489).margin(1e-12));
  CHECK(metrics::adjusted_mutual_info(labels, clusters) == Approx(0.2979754382400603).margin(1e-12));
  // The same partition under other names; one value each; one label against several clusters.
  CHECK(metrics::normalized_mutual_info({0, 0, 1, 1, 2, 2}, {9, 9, 4, 4, 1, 1}) == Approx(1.0));
  CHECK(metrics::adjusted_mutual_info({0, 0, 1, 1, 2, 2}, {9, 9, 4, 4, 1, 1}) == Approx(1.0));
  CHECK(metrics::normalized_mutual_info({3, 3, 3}, {1, 1, 1}) == 1.0);
  CHECK(metrics::adjusted_mutual_info({3, 3, 3}, {1, 1, 1}) == 1.0);
  CHECK(metrics::normalized_mutual_info({3, 3, 3}, {0, 1, 2}) == 0.0);
  CHECK(metrics::adjusted_mutual_info({3, 3, 3}, {0, 1, 2}) == 0.0);
  CHECK_THROWS_AS(metrics::normalized_mutual_info({0, 1}, {0}), DataError);

  // Random labellings (a negative AMI among them) against scikit-learn in the reference script.
  const auto& dir = references();
  for (int i = 0; i < 5; ++i) {
    const std::string prefix = "mutual_info_" + std::to_string(i);
    INFO(prefix);
    const auto truth = values_of<int64_t>(io::load_tensor(dir / (prefix + "_labels.pt")));
    const auto found = values_of<int64_t>(io::load_tensor(dir / (prefix + "_clusters.pt")));
    const auto expected = values_of<double>(io::load_tensor(dir / (prefix + "_values.pt")));
    CHECK(metrics::normalized_mutual_info(truth, found) == Approx(expected[0]).margin(1e-10));
    CHECK(metrics::adjusted_mutual_info(truth, found) == Approx(expected[1]).margin(1e-10));
  }
}

TEST_CASE("The AccuracyCalculator k-NN metrics equal PML's on random, tied, split and categorised sets",
          "[metrics][pml]") {
  const auto& dir = references();
  for (const std::string& name : reference_cases()) check_case(dir, name, kKnnArgs, kKnnMetrics, 0);
  // Blocks of a few queries by a few gallery items give the same lists, so the same values.
  check_case(dir, "ties_0", kKnnArgs, kKnnMetrics, 0, 0.002);
}

TEST_CASE("Retrieval by cosine distance gives the metrics of PML's AccuracyCalculator with CosineSimilarity",
          "[metrics][pml]") {
  const auto& dir = references();
  for (int seed = 0; seed < 3; ++seed) {
    for (const std::string layout : {"_both", "_split"}) {
      const std::string name = "cosine_" + std::to_string(seed) + layout;
      check_case(dir, name, kKnnArgs, kKnnMetrics, 0, 128, DistanceKind::cosine);
    }
  }
  // The Euclidean order differs on these rows: cosine is not the default in disguise.
  const metrics::EmbeddingSet set = reference_set(dir, "cosine_0_both");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table(kKnnArgs);
  const auto euclidean = metrics::compute_embedding_metrics(set, options).retrieval;
  options.distance = DistanceKind::cosine;
  const auto cosine = metrics::compute_embedding_metrics(set, options).retrieval;
  CHECK(euclidean.retrieved != cosine.retrieved);
}

TEST_CASE("Retrieval by dot gives the metrics of PML's AccuracyCalculator with DotProductSimilarity",
          "[metrics][pml][distance]") {
  const auto& dir = references();
  for (int seed = 0; seed < 3; ++seed) {
    for (const std::string layout : {"_both", "_split"}) {
      const std::string name = "dot_" + std::to_string(seed) + layout;
      check_case(dir, name, kKnnArgs, kKnnMetrics, 0, 128, DistanceKind::dot);
    }
  }
  // Neither the Euclidean nor the cosine order in disguise on these rows.
  const metrics::EmbeddingSet set = reference_set(dir, "dot_0_both");
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table(kKnnArgs);
  const auto euclidean = metrics::compute_embedding_metrics(set, options).retrieval;
  options.distance = DistanceKind::cosine;
  const auto cosine = metrics::compute_embedding_metrics(set, options).retrieval;
  options.distance = DistanceKind::dot;
  const auto dot = metrics::compute_embedding_metrics(set, options).retrieval;
  CHECK(dot.retrieved != euclidean.retrieved);
  CHECK(dot.retrieved != cosine.retrieved);
}

TEST_CASE("NMI and AMI equal PML's (Faiss k-means) on random, tied, split and categorised sets",
          "[metrics][pml][faiss]") {
  if (!metrics::kmeans_available()) {
    // Built without Faiss (tests/CMakeLists.txt names the test so): the metrics are refused when
    // the config is read, naming the key.
    CHECK_THROWS_AS(metric_table("{nmi: true}"), ConfigError);
    CHECK_THROWS_WITH(metric_table("{AMI: true}"),
                      Contains("metric 'ami'") && Contains("built without Faiss"));
    CHECK(metric_table("{nmi: false}").entries().size() == 3);  // off: no Faiss needed
    return;
  }
  const auto& dir = references();
  for (const std::string& name : reference_cases())
    check_case(dir, name, kClusteringArgs, kClusteringMetrics, 4);
}

TEST_CASE("The metrics are off by default and read their switch under the OML or the PML name", "[metrics]") {
  const auto defaults = metric_table("{}");
  CHECK_FALSE(defaults.reads_to_max_ground_truth());
  const auto pml_names = metric_table("{mean_reciprocal_rank: true, cmc_top_k: [1]}");
  CHECK(pml_names.reads_to_max_ground_truth());
  const auto keys = pml_names.overall_keys();
  CHECK(std::find(keys.begin(), keys.end(), "OVERALL/mrr") != keys.end());
  CHECK_THROWS_WITH(metric_table("{r_precision: sometimes}"), Contains("metric_args.r_precision"));
  CHECK_THROWS_WITH(metric_table("{mrr: true, mean_reciprocal_rank: true}"),
                    Contains("'mean_reciprocal_rank' is another name of 'mrr'"));
}

TEST_CASE("map@R's lists reach the largest ground-truth count whatever the other metrics' k", "[metrics]") {
  // One label of 30 rows (R = 29 for each of them) and ten of 2; cmc@1 alone would keep one item.
  std::vector<int64_t> labels(30, 0);
  for (int64_t i = 0; i < 20; ++i) labels.push_back(1 + i / 2);
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table(
      "{cmc_top_k: [1], precision_top_k: [], map_top_k: [], "
      "mean_average_precision_at_r: true}");
  const auto result = metrics::compute_embedding_metrics(
      test::every_item_both(torch::randn({50, 4}, generator), labels), options);
  for (int64_t q = 0; q < result.retrieval.num_queries(); ++q) CHECK(result.retrieval.size(q) == 29);
  CHECK(result.metrics.count("OVERALL/mean_average_precision_at_r") == 1);
}

}  // namespace pml_metrics_tests
