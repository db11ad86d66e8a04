// Postprocessors (docs/metrics.md#postprocessors-postprocessor): thresholding and pairwise re-ranking on
// hand-made results.
#include <limits>
#include <map>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/postprocessor.h"
#include "shell/components.h"
#include "support/support.h"

namespace postprocessor_tests {

using namespace oml;
using Catch::Matchers::Contains;

namespace {

// One list per query; gallery position i has dataset id 100 + i and label i % 2.
retrieval::RetrievalResults make_results(const std::vector<std::vector<int64_t>>& ids,
                                         const std::vector<std::vector<float>>& distances) {
  retrieval::RetrievalResults r;
  for (std::size_t q = 0; q < ids.size(); ++q) {
    r.retrieved.insert(r.retrieved.end(), ids[q].begin(), ids[q].end());
    r.distances.insert(r.distances.end(), distances[q].begin(), distances[q].end());
    r.offsets.push_back(static_cast<int64_t>(r.retrieved.size()));
    r.n_gt.push_back(1);
    r.query_labels.push_back(0);
    r.query_ids.push_back(static_cast<int64_t>(q));
  }
  for (int64_t g = 0; g < 10; ++g) {
    r.gallery_ids.push_back(100 + g);
    r.gallery_labels.push_back(g % 2);
  }
  return r;
}

std::vector<int64_t> ids_of(const retrieval::RetrievalResults& r, int64_t q) {
  return {r.retrieved.begin() + r.begin(q), r.retrieved.begin() + r.end(q)};
}
std::vector<float> distances_of(const retrieval::RetrievalResults& r, int64_t q) {
  return {r.distances.begin() + r.begin(q), r.distances.begin() + r.end(q)};
}

// A scorer that looks up fixed scores per (query id, gallery id) and records batch sizes.
struct TableScorer {
  std::map<std::pair<int64_t, int64_t>, float> scores;
  std::vector<std::size_t>* batches = nullptr;

  std::vector<float> operator()(const std::vector<int64_t>& q, const std::vector<int64_t>& g) const {
    if (batches != nullptr) batches->push_back(q.size());
    std::vector<float> out;
    for (std::size_t i = 0; i < q.size(); ++i) out.push_back(scores.at({q[i], g[i]}));
    return out;
  }
};

std::shared_ptr<retrieval::Postprocessor> create(const std::string& yaml,
                                                 const retrieval::PostprocessorContext& context) {
  oml::cli::register_builtins();
  const auto document = config::Document::from_string(yaml, "post.yaml");
  const auto spec = config::parse_component(document.root()["postprocessor"], "postprocessor");
  return registries().postprocessors.create(spec, context);
}

}  // namespace

TEST_CASE("constant_thresholding keeps the items closer than th", "[postprocessors]") {
  const auto results = make_results({{3, 1, 4}, {2, 5}, {}}, {{0.1f, 0.5f, 0.9f}, {0.6f, 0.7f}, {}});
  const auto out =
      create("postprocessor: {name: constant_thresholding, args: {th: 0.6}}", {})->process(results);
  CHECK(ids_of(out, 0) == std::vector<int64_t>{3, 1});
  CHECK(ids_of(out, 1).empty());  // 0.6 is not < 0.6
  CHECK(out.size(2) == 0);
  CHECK(out.n_gt == results.n_gt);
  out.check_consistent();
}

TEST_CASE("adaptive_thresholding cuts each list at its first gap above n_std mean gaps", "[postprocessors]") {
  // Gaps: q0 [0.1, 0.1, 1.0], q1 [0.2]; mean gap = 1.4 / 4 = 0.35.
  const auto results = make_results({{0, 1, 2, 3}, {4, 5}}, {{0.f, 0.1f, 0.2f, 1.2f}, {0.f, 0.2f}});
  const auto out =
      create("postprocessor: {name: adaptive_thresholding, args: {n_std: 2}}", {})->process(results);
  CHECK(ids_of(out, 0) == std::vector<int64_t>{0, 1, 2});  // 1.0 > 0.7 cuts after the third item
  CHECK(ids_of(out, 1) == std::vector<int64_t>{4, 5});     // 0.2 <= 0.7 keeps everything
  CHECK_THROWS_AS(create("postprocessor: {name: adaptive_thresholding, args: {n_std: 0}}", {}), ConfigError);
}

TEST_CASE("pairwise_reranker with the original distances as scores changes nothing", "[postprocessors]") {
  const auto results = make_results({{3, 2, 1, 0, 4}, {7, 8}}, {{0.1f, 0.2f, 0.5f, 0.6f, 0.7f}, {1.f, 1.f}});
  TableScorer identity;
  for (int64_t q = 0; q < results.num_queries(); ++q) {
    for (int64_t i = 0; i < results.size(q); ++i) {
      identity.scores[{q, 100 + results.retrieved[results.begin(q) + i]}] =
          results.distances[results.begin(q) + i];
    }
  }
  retrieval::PostprocessorContext context;
  context.pairwise_scores = identity;
  const auto out =
      create("postprocessor: {name: pairwise_reranker, args: {top_n: 3, batch_size: 2}}", context)
          ->process(results);
  CHECK(out.retrieved == results.retrieved);
  CHECK(out.distances == results.distances);
}

TEST_CASE("pairwise_reranker re-sorts the head and keeps the tail", "[postprocessors]") {
  // OML's example 1: new head scores [0.4, 0.2, 0.3] for items [3, 2, 1].
  const auto results = make_results({{3, 2, 1, 0, 4}}, {{0.1f, 0.2f, 0.5f, 0.6f, 0.7f}});
  TableScorer scorer;
  scorer.scores = {{{0, 103}, 0.4f}, {{0, 102}, 0.2f}, {{0, 101}, 0.3f}};
  std::vector<std::size_t> batches;
  scorer.batches = &batches;
  const auto reranker = retrieval::make_pairwise_reranker({3, 2}, scorer);
  const auto out = reranker->process(results);
  CHECK(ids_of(out, 0) == std::vector<int64_t>{2, 1, 3, 0, 4});
  CHECK(distances_of(out, 0) == std::vector<float>{0.2f, 0.3f, 0.4f, 0.6f, 0.7f});
  CHECK(batches == std::vector<std::size_t>{2, 1});
  CHECK(reranker->required_top_k() == 3);
}

TEST_CASE("pairwise_reranker rescales a head that would overtake the tail", "[postprocessors]") {
  // OML's example 2: head scores [1, 2, 5] against a tail starting at 0.5 -> scale 0.1.
  const auto results = make_results({{0, 1, 2, 3, 4}}, {{0.1f, 0.2f, 0.3f, 0.5f, 0.6f}});
  TableScorer scorer;
  scorer.scores = {{{0, 100}, 1.f}, {{0, 101}, 2.f}, {{0, 102}, 5.f}};
  const auto out = retrieval::make_pairwise_reranker({3, 128}, scorer)->process(results);
  const auto distances = distances_of(out, 0);
  CHECK(ids_of(out, 0) == std::vector<int64_t>{0, 1, 2, 3, 4});
  // Shifted down by OML's PairwiseReranker gap, 1000 float32 epsilons (its helper's default, 1e-6,
  // is what OML's docstring example shows).
  const double gap = 1000.0 * std::numeric_limits<float>::epsilon();
  CHECK(distances[0] == Approx(0.1 - gap).margin(1e-7));
  CHECK(distances[1] == Approx(0.2 - gap).margin(1e-7));
  CHECK(distances[2] == Approx(0.5 - gap).margin(1e-7));
  CHECK(distances[2] < distances[3]);
  CHECK(distances[3] == 0.5f);
  out.check_consistent();
}

TEST_CASE("pairwise_reranker keeps the head below a negative tail (distances -q.g under dot)",
          "[postprocessors][distance]") {
  // Under `distance: dot` distances are -q.g and may be negative: the head is shifted below the
  // tail's first distance, never scaled (a scale would flip the order of negative values).
  const auto results = make_results({{0, 1, 2, 3, 4}}, {{-9.f, -8.f, -7.f, -5.f, -4.f}});
  TableScorer scorer;
  scorer.scores = {{{0, 100}, 5.f}, {{0, 101}, 1.f}, {{0, 102}, 2.f}};
  const auto out = retrieval::make_pairwise_reranker({3, 128}, scorer)->process(results);
  const auto distances = distances_of(out, 0);
  CHECK(ids_of(out, 0) == std::vector<int64_t>{1, 2, 0, 3, 4});
  const double gap = 1000.0 * std::numeric_limits<float>::epsilon();  // OML's
  CHECK(distances[0] == Approx(1.0 - 10.0 - gap).margin(1e-5));       // scores + (tail - last head - gap)
  CHECK(distances[1] == Approx(2.0 - 10.0 - gap).margin(1e-5));
  CHECK(distances[2] < -5.0f);
  CHECK(distances[3] == -5.0f);
  out.check_consistent();
}

TEST_CASE("pairwise_reranker without a pairwise model is a config error", "[postprocessors]") {
  CHECK_THROWS_WITH(create("postprocessor: {name: pairwise_reranker, args: {top_n: 5}}", {}),
                    Contains("needs a pairwise model") && Contains("post.yaml"));
  TableScorer scorer;
  retrieval::PostprocessorContext context;
  context.pairwise_scores = scorer;
  CHECK_THROWS_AS(create("postprocessor: {name: pairwise_reranker, args: {top_n: 1}}", context), ConfigError);
  CHECK_THROWS_WITH(create("postprocessor: {name: pairwise_reranker, args: {top_n: 3, topn: 2}}", context),
                    Contains("topn"));
}

TEST_CASE("pairwise_reranker reports a model that returns NaN", "[postprocessors]") {
  const auto results = make_results({{0, 1}}, {{0.1f, 0.2f}});
  const retrieval::PairScorer broken = [](const std::vector<int64_t>& q, const std::vector<int64_t>&) {
    return std::vector<float>(q.size(), NAN);
  };
  CHECK_THROWS_AS(retrieval::make_pairwise_reranker({2, 8}, broken)->process(results), RuntimeError);
}

}  // namespace postprocessor_tests
