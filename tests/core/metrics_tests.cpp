// Retrieval metrics (docs/metrics.md): the reference values, fnmr@fmr, pcf, embedding metrics with
// categories, sequences and empty results.
#include <torch/torch.h>

#include <cmath>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/metrics/detail/pair_statistics.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/fnmr.h"
#include "oml/metrics/pcf.h"
#include "oml/metrics/retrieval_metrics.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "shell/components.h"
#include "support/embedding_sets.h"
#include "support/support.h"

namespace metrics_tests {

using namespace oml;
using Catch::Matchers::Contains;

using oml::test::every_item_both;

namespace {

// docs/metrics.md#reference-values: labels [0,0,0,0,1,1], every item query and gallery, 5 retrieved
// per query, relevant positions [[0,1,3],[0,3,4],[1,2,4],[2,3,4],[0],[3]].
metrics::QueryHits reference_hits() {
  const std::vector<std::vector<int>> relevant{{0, 1, 3}, {0, 3, 4}, {1, 2, 4}, {2, 3, 4}, {0}, {3}};
  const std::vector<int64_t> n_gt{3, 3, 3, 3, 1, 1};
  metrics::QueryHits hits;
  for (std::size_t q = 0; q < relevant.size(); ++q) {
    std::vector<uint8_t> row(5, 0);
    for (const int position : relevant[q]) row[position] = 1;
    hits.add_query(row, n_gt[q]);
  }
  return hits;
}

// The metric table a config's `metric_args: <yaml>` configures.
metrics::MetricTable metric_table(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto document = config::Document::from_string("metric_args: " + yaml + "\n", "metrics.yaml");
  return metrics::configure_metrics(document.root()["metric_args"]);
}

void check_values(const std::vector<double>& actual, const std::vector<double>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO("query " << i);
    CHECK(actual[i] == Approx(expected[i]).margin(1e-12));
  }
}

// Pair distances of every non-ignored (query, gallery) pair, split by label equality, computed
// directly in double precision.
void brute_force_pairs(const torch::Tensor& embeddings, const std::vector<int64_t>& labels,
                       std::vector<double>& positive, std::vector<double>& negative) {
  const auto e = embeddings.to(torch::kDouble);
  for (int64_t q = 0; q < e.size(0); ++q) {
    for (int64_t g = 0; g < e.size(0); ++g) {
      if (q == g) continue;
      const double d = (e[q] - e[g]).pow(2).sum().sqrt().item<double>();
      (labels[q] == labels[g] ? positive : negative).push_back(d);
    }
  }
}

}  // namespace

TEST_CASE("cmc, precision and map reproduce the documented reference values", "[metrics]") {
  const auto hits = reference_hits();
  check_values(metrics::cmc_at_k(hits, 1), {1, 1, 0, 0, 1, 0});
  check_values(metrics::precision_at_k(hits, 2), {1, .5, .5, 0, 1, 0});
  check_values(metrics::precision_at_k(hits, 3), {2. / 3, 1. / 3, 2. / 3, 1. / 3, 1, 0});
  check_values(metrics::map_at_k(hits, 3), {1, 1, 7. / 12, 1. / 3, 1, 0});
  check_values(metrics::map_at_k(hits, 5), {11. / 12, 21. / 30, 53. / 90, 43. / 90, 1, 1. / 4});
}

TEST_CASE("Queries with nothing retrieved score 1 without ground truth and 0 with it", "[metrics]") {
  metrics::QueryHits hits;
  hits.add_query({}, 0);
  hits.add_query({}, 2);
  hits.add_query({0, 0}, 0);  // retrieved items but no ground truth: precision 0 [differs from OML's NaN]
  check_values(metrics::cmc_at_k(hits, 3), {1, 0, 0});
  check_values(metrics::precision_at_k(hits, 3), {1, 0, 0});
  check_values(metrics::map_at_k(hits, 3), {1, 0, 0});
}

TEST_CASE("A top k larger than the retrieved list uses the list's length", "[metrics]") {
  metrics::QueryHits hits;
  hits.add_query({0, 1}, 4);  // k' = min(10, 2) = 2; precision = 1 / min(4, 2)
  check_values(metrics::precision_at_k(hits, 10), {0.5});
  check_values(metrics::map_at_k(hits, 10), {0.5});
  check_values(metrics::cmc_at_k(hits, 1), {0});
  CHECK_THROWS_AS(metrics::cmc_at_k(hits, 0), ConfigError);
}

TEST_CASE("fnmr@fmr reproduces the documented example", "[metrics]") {
  const std::vector<double> positive{0, 0, 1, 1, 2, 2, 5, 5, 9, 9};
  const std::vector<double> negative{3, 3, 4, 4, 6, 6, 7, 7, 8, 8};
  check_values(metrics::fnmr_at_fmr(positive, negative, {0.1, 0.5}), {0.4, 0.2});
}

TEST_CASE("quantile_linear interpolates like numpy.quantile", "[metrics]") {
  // numpy.quantile([4, 1, 3, 2], q) = 1 + 3q for this evenly spaced set.
  CHECK(metrics::quantile_linear({4, 1, 3, 2}, 0.0) == 1.0);
  CHECK(metrics::quantile_linear({4, 1, 3, 2}, 0.5) == 2.5);
  CHECK(metrics::quantile_linear({4, 1, 3, 2}, 1.0) == 4.0);
  CHECK(metrics::quantile_linear({4, 1, 3, 2}, 0.1) == Approx(1.3));
  CHECK(metrics::quantile_linear({10, 0}, 0.75) == 7.5);
  CHECK(metrics::quantile_linear({5}, 0.3) == 5.0);
  CHECK_THROWS_AS(metrics::quantile_linear({}, 0.5), UsageError);
}

TEST_CASE("fnmr@fmr over all pairs in bounded memory equals the in-memory quantile", "[metrics]") {
  // Integer embeddings make every float distance computation exact, so both sides see the
  // same distances and must agree exactly.
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const int64_t n = 60;
  const torch::Tensor embeddings = torch::randint(-4, 5, {n, 3}, generator).to(torch::kFloat);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back(i % 7);
  std::vector<double> positive, negative;
  brute_force_pairs(embeddings, labels, positive, negative);
  const std::vector<double> fmr_vals{0.0, 0.01, 0.1, 0.37, 0.5, 1.0};
  const auto expected = metrics::fnmr_at_fmr(positive, negative, fmr_vals);

  retrieval::ItemSet items{embeddings, labels, {}, {}};
  for (int64_t i = 0; i < n; ++i) items.ids.push_back(i);
  const retrieval::detail::PreparedPair pair(items, items);
  const retrieval::IgnoredPairs ignored(items, items);
  const auto n_gt = retrieval::count_ground_truth(items, items, ignored);

  SECTION("with the default options: every negative fits the window, one pass") {
    metrics::detail::PairStatistics stats(pair, ignored, labels, labels, n_gt, fmr_vals);
    retrieval::detail::for_each_block(pair, {16, 23}, {&stats.first_pass()});
    check_values(stats.finish({16, 23}), expected);
    CHECK(stats.num_positive() == static_cast<int64_t>(positive.size()));
    CHECK(stats.num_negative() == static_cast<int64_t>(negative.size()));
    CHECK(stats.passes() == 1);
  }
  SECTION("with windows placed from a sample") {
    metrics::detail::PairStatisticsOptions options;
    options.window_cap = static_cast<int64_t>(negative.size()) - 1;
    metrics::detail::PairStatistics stats(pair, ignored, labels, labels, n_gt, fmr_vals, options);
    retrieval::detail::for_each_block(pair, {16, 23}, {&stats.first_pass()});
    check_values(stats.finish({16, 23}), expected);
    CHECK(stats.passes() == 1);
  }
  SECTION("with windows too narrow to hold the ranks: the histogram passes repair it") {
    metrics::detail::PairStatisticsOptions options;
    options.window_cap = 12;
    options.sample_chunks = 1;
    metrics::detail::PairStatistics stats(pair, ignored, labels, labels, n_gt, fmr_vals, options);
    retrieval::detail::for_each_block(pair, {16, 23}, {&stats.first_pass()});
    check_values(stats.finish({16, 23}), expected);
    CHECK(stats.passes() == 3);  // windows, histogram, collection
  }
  SECTION("without windows: the default histogram") {
    metrics::detail::PairStatisticsOptions options;
    options.window_cap = 0;
    metrics::detail::PairStatistics stats(pair, ignored, labels, labels, n_gt, fmr_vals, options);
    retrieval::detail::for_each_block(pair, {16, 23}, {&stats.first_pass()});
    check_values(stats.finish({16, 23}), expected);
    CHECK(stats.passes() == 2);
  }
  SECTION("with tiny histograms that force refinement and a counting pass for positives") {
    metrics::detail::PairStatisticsOptions options;
    options.window_cap = 0;
    options.bins = 4;
    options.collect_cap = 3;
    options.positive_cap = 0;
    metrics::detail::PairStatistics stats(pair, ignored, labels, labels, n_gt, fmr_vals, options);
    retrieval::detail::for_each_block(pair, {7, 60}, {&stats.first_pass()});
    check_values(stats.finish({7, 60}), expected);
    CHECK(stats.passes() > 3);
  }
}

TEST_CASE("fnmr@fmr over all pairs leaves out same-sequence pairs, in every mode", "[metrics]") {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t n = 70;
  const torch::Tensor embeddings = torch::randint(-4, 5, {n, 3}, generator).to(torch::kFloat);
  std::vector<int64_t> labels, sequences;
  for (int64_t i = 0; i < n; ++i) {
    labels.push_back(i % 6);
    sequences.push_back(i % 2 ? (i / 2) % 9 : -1);  // odd items share sequences across labels
  }
  std::vector<double> positive, negative;
  const auto e = embeddings.to(torch::kDouble);
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t g = 0; g < n; ++g) {
      if (q == g || (sequences[q] >= 0 && sequences[q] == sequences[g])) continue;
      const double d = (e[q] - e[g]).pow(2).sum().sqrt().item<double>();
      (labels[q] == labels[g] ? positive : negative).push_back(d);
    }
  }
  const std::vector<double> fmr_vals{0.0, 0.02, 0.25, 0.6, 1.0};
  const auto expected = metrics::fnmr_at_fmr(positive, negative, fmr_vals);

  retrieval::ItemSet items{embeddings, labels, {}, sequences};
  for (int64_t i = 0; i < n; ++i) items.ids.push_back(i);
  const retrieval::detail::PreparedPair pair(items, items);
  const retrieval::IgnoredPairs ignored(items, items);
  const auto n_gt = retrieval::count_ground_truth(items, items, ignored);
  for (const int64_t cap :
       {int64_t{1} << 25, static_cast<int64_t>(negative.size()) / 2, int64_t{10}, int64_t{0}}) {
    INFO("window_cap " << cap);
    metrics::detail::PairStatisticsOptions options;
    options.window_cap = cap;
    options.sample_chunks = 3;
    metrics::detail::PairStatistics stats(pair, ignored, labels, labels, n_gt, fmr_vals, options);
    CHECK(stats.num_negative() == static_cast<int64_t>(negative.size()));
    retrieval::detail::for_each_block(pair, {9, 31}, {&stats.first_pass()});
    check_values(stats.finish({9, 31}), expected);
  }
}

TEST_CASE("fnmr@fmr on float embeddings agrees with exact distances", "[metrics]") {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  const int64_t n = 80;
  const torch::Tensor embeddings = torch::randn({n, 8}, generator);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back(i % 5);
  std::vector<double> positive, negative;
  brute_force_pairs(embeddings, labels, positive, negative);
  const auto expected = metrics::fnmr_at_fmr(positive, negative, {0.05, 0.3});
  auto set = every_item_both(embeddings, labels);
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table("{fmr_vals: [0.05, 0.3]}");
  const auto result = metrics::compute_embedding_metrics(set, options);
  // Float rounding of the distances may move a positive across T: at most one pair.
  CHECK(result.metrics.at("OVERALL/fnmr@fmr/0.05") ==
        Approx(expected[0]).margin(1.0 / positive.size() + 1e-12));
  CHECK(result.metrics.at("OVERALL/fnmr@fmr/0.3") ==
        Approx(expected[1]).margin(1.0 / positive.size() + 1e-12));
}

TEST_CASE("pcf counts the principal components needed to exceed the variance fraction", "[metrics]") {
  // OML's example: four one-hot rows of dimension 10 have three equal principal variances.
  const torch::Tensor embeddings = torch::eye(4, 10);
  const auto pcf = metrics::principal_components_fraction(embeddings, {0.1, 0.5, 0.9, 1.0});
  check_values(pcf, {0.1, 0.2, 0.3, 1.0});
  CHECK_THROWS_AS(metrics::principal_components_fraction(embeddings, {1.5}), ConfigError);
  CHECK_THROWS_AS(metrics::principal_components_fraction(torch::ones({1, 3}), {0.5}), DataError);
}

TEST_CASE("Embedding metrics break results down by category and keep per-query values", "[metrics]") {
  // Two categories on a line; neighbours are unambiguous.
  const torch::Tensor embeddings = torch::tensor({0.f, 1.f, 2.2f, 10.f, 11.5f, 13.2f, 13.4f}).reshape({7, 1});
  metrics::EmbeddingSet set = every_item_both(embeddings, {0, 0, 1, 2, 2, 3, 2});
  set.categories = {"shoes", "shoes", "shoes", "bags", "bags", "bags", "bags"};
  metrics::EmbeddingMetricsOptions options;
  const std::string args =
      "cmc_top_k: [1], precision_top_k: [2], map_top_k: [], fmr_vals: [0.5], pcf_variance: [0.5]";
  options.metrics = metric_table("{" + args + "}");
  const auto result = metrics::compute_embedding_metrics(set, options);

  // cmc@1 per query: 0->1 hit, 1->0 hit, 2->1 miss, 3->4 hit, 4->3 hit, 5->6 miss, 6->5 miss.
  check_values(result.per_query.at("cmc/1"), {1, 1, 0, 1, 1, 0, 0});
  CHECK(result.metrics.at("OVERALL/cmc/1") == Approx(4.0 / 7));
  CHECK(result.metrics.at("shoes/cmc/1") == Approx(2.0 / 3));
  CHECK(result.metrics.at("bags/cmc/1") == Approx(2.0 / 4));
  // precision@2: query 2 and 5 have no ground truth -> 0; query 6: [5 miss, 4 hit] / min(2, 2).
  check_values(result.per_query.at("precision/2"), {1, 1, 0, 0.5, 0.5, 0, 0.5});
  CHECK(result.queries_without_ground_truth == 2);
  CHECK(result.metrics.count("OVERALL/fnmr@fmr/0.5") == 1);
  CHECK(result.metrics.count("shoes/fnmr@fmr/0.5") == 0);  // fnmr is reported under OVERALL only
  CHECK(result.metrics.count("OVERALL/pcf/0.5") == 1);
  CHECK(result.query_dataset_indices == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});

  options.metrics = metric_table("{" + args + ", return_only_overall_category: true}");
  const auto overall_only = metrics::compute_embedding_metrics(set, options);
  for (const auto& entry : overall_only.metrics) CHECK_THAT(entry.first, Catch::StartsWith("OVERALL/"));
}

TEST_CASE("Same-sequence items are neither retrieved nor ground truth, and empty lists score by n_gt",
          "[metrics]") {
  // Items 0 and 1 share a sequence: for query 0 the only other label-0 item is ignored, so it
  // has no ground truth; the gallery items left are all of other labels.
  const torch::Tensor embeddings = torch::tensor({0.f, 0.1f, 5.f, 6.f}).reshape({4, 1});
  metrics::EmbeddingSet set = every_item_both(embeddings, {0, 0, 1, 1});
  set.sequences = {"s", "s", "", ""};
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table("{cmc_top_k: [1]}");
  const auto result = metrics::compute_embedding_metrics(set, options);
  CHECK(result.retrieval.n_gt == std::vector<int64_t>{0, 0, 1, 1});
  CHECK(result.retrieval.retrieved[result.retrieval.begin(0)] == 2);
  check_values(result.per_query.at("cmc/1"), {0, 0, 1, 1});

  SECTION("a query whose whole gallery is ignored retrieves nothing") {
    set.sequences = {"s", "s", "s", "s"};
    const auto empty = metrics::compute_embedding_metrics(set, options);
    for (int64_t q = 0; q < 4; ++q) CHECK(empty.retrieval.size(q) == 0);
    check_values(empty.per_query.at("cmc/1"), {1, 1, 1, 1});  // n_gt = 0 and R = 0
  }
}

TEST_CASE("Separate query and gallery rows use only gallery rows as candidates", "[metrics]") {
  const torch::Tensor embeddings = torch::tensor({0.f, 0.5f, 3.f, 0.4f}).reshape({4, 1});
  metrics::EmbeddingSet set;
  set.embeddings = embeddings;
  set.labels = {1, 2, 1, 2};
  set.is_query = {1, 1, 0, 0};
  set.is_gallery = {0, 0, 1, 1};
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table("{cmc_top_k: [1, 2]}");
  const auto result = metrics::compute_embedding_metrics(set, options);
  // Query 0 (label 1): nearest gallery is row 3 (label 2) -> cmc@1 = 0, cmc@2 = 1.
  check_values(result.per_query.at("cmc/1"), {0, 1});
  check_values(result.per_query.at("cmc/2"), {1, 1});
  CHECK(result.retrieval.gallery_ids == std::vector<int64_t>{2, 3});
}

TEST_CASE("Embedding metrics reject inconsistent rows", "[metrics]") {
  metrics::EmbeddingSet set = every_item_both(torch::zeros({3, 2}), {0, 0, 1});
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table("{}");
  SECTION("labels of another length") {
    set.labels = {0, 1};
    CHECK_THROWS_WITH(metrics::compute_embedding_metrics(set, options),
                      Contains("3 embeddings but 2 labels"));
  }
  SECTION("no gallery rows") {
    set.is_gallery = {0, 0, 0};
    CHECK_THROWS_AS(metrics::compute_embedding_metrics(set, options), DataError);
  }
  SECTION("a NaN in a row") {
    set.embeddings[1][1] = NAN;
    CHECK_THROWS_WITH(metrics::compute_embedding_metrics(set, options), Contains("row 1"));
  }
}

TEST_CASE("Metric keys print fmr and pcf values minimally", "[metrics]") {
  CHECK(metrics::format_key_number(0.01) == "0.01");
  CHECK(metrics::format_key_number(0.5) == "0.5");
  CHECK(metrics::format_key_number(1.0) == "1");
  CHECK(metrics::format_key_number(0.001) == "0.001");
  CHECK(metrics::format_key_number(0.3) == "0.3");
}

TEST_CASE("ndcg@k divides the DCG of the first k by that of a perfect ranking", "[metrics]") {
  // Four items on a line, labels [0, 1, 0, 0], every item a query and a gallery item.
  const torch::Tensor embeddings = torch::tensor({0.f, 1.f, 2.f, 10.f}).reshape({4, 1});
  const metrics::EmbeddingSet set = every_item_both(embeddings, {0, 1, 0, 0});
  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table("{cmc_top_k: [1], ndcg_top_k: [2]}");
  const auto result = metrics::compute_embedding_metrics(set, options);
  // Query 0 retrieves [1 miss, 2 hit], n_gt 2: (1 / log2 3) / (1 + 1 / log2 3); query 2 the
  // same; query 1 has no ground truth: 0; query 3 retrieves [2 hit, 1 miss]: 1 / (1 + 1 / log2 3).
  const double ideal = 1 + 1 / std::log2(3.0);
  const std::vector<double> expected{1 / std::log2(3.0) / ideal, 0, 1 / std::log2(3.0) / ideal, 1 / ideal};
  check_values(result.per_query.at("ndcg/2"), expected);
  CHECK(result.metrics.at("OVERALL/ndcg/2") ==
        Approx((expected[0] + expected[1] + expected[2] + expected[3]) / 4).margin(1e-12));
  // An empty list: 1 without ground truth, 0 with it; a list cut short keeps the ideal of k.
  metrics::QueryHits hits;
  hits.add_query({}, 0);
  hits.add_query({}, 2);
  hits.add_query({1}, 3);
  check_values(metrics::ndcg_at_k(hits, 2), {1.0, 0.0, 1 / ideal});
  CHECK_THROWS_WITH(
      metric_table("{ndcg_top_k: [0]}"),
      Contains("metric_args.ndcg_top_k: metric 'ndcg': k values must be positive integers, got 0"));
}

}  // namespace metrics_tests
