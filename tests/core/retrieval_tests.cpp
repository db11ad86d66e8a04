// Chunked k-NN retrieval against a brute-force full-matrix ranking (docs/metrics.md#retrieval).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "oml/common/error.h"
#include "oml/retrieval/knn.h"
#include "support/support.h"

namespace retrieval_tests {

using namespace oml;

namespace {

struct Expected {
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<float>> distances;
  std::vector<int64_t> n_gt;
};

// The full Q x G matrix in double precision, ranked by (distance, gallery position).
Expected brute_force(const retrieval::ItemSet& queries, const retrieval::ItemSet& gallery, int64_t k) {
  const auto q = queries.embeddings.contiguous();
  const auto g = gallery.embeddings.contiguous();
  const auto qa = q.accessor<float, 2>();
  const auto ga = g.accessor<float, 2>();
  const auto nq = q.size(0), ng = g.size(0);
  auto squared_distance = [&](int64_t i, int64_t j) {
    double sum = 0.0;
    for (int64_t d = 0; d < q.size(1); ++d) {
      const double diff = static_cast<double>(qa[i][d]) - static_cast<double>(ga[j][d]);
      sum += diff * diff;
    }
    return sum;
  };
  Expected out;
  for (int64_t i = 0; i < nq; ++i) {
    std::vector<std::pair<double, int64_t>> row;
    int64_t n_gt = 0;
    for (int64_t j = 0; j < ng; ++j) {
      const bool self = queries.ids[i] == gallery.ids[j];
      const bool same_sequence = !queries.sequences.empty() && queries.sequences[i] >= 0 &&
                                 queries.sequences[i] == gallery.sequences[j];
      if (self || same_sequence) continue;
      row.emplace_back(squared_distance(i, j), j);
      n_gt += gallery.labels[j] == queries.labels[i];
    }
    std::sort(row.begin(), row.end());
    row.resize(std::min<std::size_t>(row.size(), static_cast<std::size_t>(k)));
    out.ids.emplace_back();
    out.distances.emplace_back();
    for (const auto& [distance2, position] : row) {
      out.ids.back().push_back(position);
      out.distances.back().push_back(static_cast<float>(std::sqrt(distance2)));
    }
    out.n_gt.push_back(n_gt);
  }
  return out;
}

void check_equal(const retrieval::RetrievalResults& actual, const Expected& expected) {
  actual.check_consistent();
  REQUIRE(actual.num_queries() == static_cast<int64_t>(expected.ids.size()));
  CHECK(actual.n_gt == expected.n_gt);
  for (int64_t q = 0; q < actual.num_queries(); ++q) {
    INFO("query " << q);
    const std::vector<int64_t> ids(actual.retrieved.begin() + actual.begin(q),
                                   actual.retrieved.begin() + actual.end(q));
    const std::vector<float> distances(actual.distances.begin() + actual.begin(q),
                                       actual.distances.begin() + actual.end(q));
    CHECK(ids == expected.ids[q]);
    CHECK(distances == expected.distances[q]);
  }
}

retrieval::ItemSet random_set(int64_t n, int64_t dim, int64_t classes, int64_t first_id, uint64_t seed,
                              bool with_sequences) {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  retrieval::ItemSet set;
  const auto labels = torch::randint(0, classes, {n}, generator);
  const auto centres = torch::randn({classes, dim}, generator);
  set.embeddings = centres.index_select(0, labels) + 0.8 * torch::randn({n, dim}, generator);
  for (int64_t i = 0; i < n; ++i) {
    set.labels.push_back(labels[i].item<int64_t>());
    set.ids.push_back(first_id + i);
    if (with_sequences) set.sequences.push_back(i % 4 == 3 ? -1 : (i / 3) % 11);
  }
  return set;
}

}  // namespace

TEST_CASE("Chunked retrieval equals the brute-force ranking for many block shapes", "[retrieval]") {
  const bool with_sequences = GENERATE(false, true);
  const auto items = random_set(97, 16, 9, 0, 11, with_sequences);
  const int64_t k = GENERATE(1, 5, 40);
  const Expected expected = brute_force(items, items, k);
  for (const auto& shape :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 97}, {7, 13}, {32, 50}, {97, 97}, {200, 1000}}) {
    INFO("sequences " << with_sequences << ", k " << k << ", chunk " << shape.first << ", tile "
                      << shape.second);
    retrieval::KnnOptions options;
    options.top_k = k;
    options.query_chunk = shape.first;
    options.gallery_tile = shape.second;
    check_equal(retrieval::retrieve_knn(items, items, options), expected);
  }
}

TEST_CASE("Separate query and gallery sets are retrieved without self-exclusion", "[retrieval]") {
  const bool with_sequences = GENERATE(false, true);
  const auto queries = random_set(31, 8, 5, 1000, 5, with_sequences);
  const auto gallery = random_set(70, 8, 5, 2000, 6, with_sequences);
  retrieval::KnnOptions options;
  options.top_k = 6;
  options.query_chunk = 4;
  options.gallery_tile = 16;
  const auto results = retrieval::retrieve_knn(queries, gallery, options);
  check_equal(results, brute_force(queries, gallery, 6));
  CHECK(results.gallery_ids == gallery.ids);
  CHECK(results.query_ids == queries.ids);
}

TEST_CASE("Exact ties and duplicated vectors are ordered by gallery position", "[retrieval]") {
  // Integer points on a small grid: many equal distances and duplicated rows.
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(2);
  retrieval::ItemSet items;
  items.embeddings = torch::randint(0, 3, {60, 2}, generator).to(torch::kFloat);
  for (int64_t i = 0; i < 60; ++i) {
    items.labels.push_back(i % 3);
    items.ids.push_back(i);
  }
  for (const int64_t chunk : {1, 8, 60}) {
    retrieval::KnnOptions options;
    options.top_k = 12;
    options.query_chunk = chunk;
    options.gallery_tile = 9;
    check_equal(retrieval::retrieve_knn(items, items, options), brute_force(items, items, 12));
  }
}

TEST_CASE("Retrieval stays exact where the matmul expansion loses precision", "[retrieval]") {
  // Far from the origin, ||q||^2 + ||g||^2 - 2 q.g cancels catastrophically in float32; the
  // candidates' distances are recomputed exactly, so the order is still the true one.
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(9);
  retrieval::ItemSet items;
  items.embeddings = 1000.0 + 0.01 * torch::randn({50, 4}, generator);
  for (int64_t i = 0; i < 50; ++i) {
    items.labels.push_back(i % 2);
    items.ids.push_back(i);
  }
  retrieval::KnnOptions options;
  options.top_k = 5;
  options.query_chunk = 6;
  options.gallery_tile = 11;
  check_equal(retrieval::retrieve_knn(items, items, options), brute_force(items, items, 5));
}

TEST_CASE("A top k larger than the gallery returns every non-ignored item", "[retrieval]") {
  const auto items = random_set(10, 3, 2, 0, 1, true);
  retrieval::KnnOptions options;
  options.top_k = 50;
  const auto results = retrieval::retrieve_knn(items, items, options);
  check_equal(results, brute_force(items, items, 50));
  const retrieval::IgnoredPairs ignored(items, items);
  for (int64_t q = 0; q < results.num_queries(); ++q) CHECK(results.size(q) == 10 - ignored.count(q));
}

TEST_CASE("The block shape follows the memory budget", "[retrieval]") {
  retrieval::KnnOptions options;
  options.memory_budget_mb = 64;
  const auto shape = retrieval::choose_block_shape(60000, 60000, options);
  CHECK(shape.gallery_tile == 16384);
  CHECK(shape.query_chunk * shape.gallery_tile * 4 <= 64 * 1024 * 1024);
  CHECK(shape.query_chunk > 512);
  const auto small = retrieval::choose_block_shape(10, 20, options);
  CHECK(small.query_chunk == 10);
  CHECK(small.gallery_tile == 20);
  options.memory_budget_mb = 0;
  CHECK_THROWS_AS(retrieval::choose_block_shape(10, 20, options), ConfigError);
}

TEST_CASE("Retrieval rejects inconsistent inputs with the row named", "[retrieval]") {
  auto items = random_set(5, 3, 2, 0, 1, false);
  retrieval::KnnOptions options;
  SECTION("labels missing") {
    items.labels.pop_back();
    CHECK_THROWS_AS(retrieval::retrieve_knn(items, items, options), DataError);
  }
  SECTION("an infinite value") {
    items.embeddings[3][1] = INFINITY;
    CHECK_THROWS_WITH(retrieval::retrieve_knn(items, items, options), Catch::Contains("row 3"));
  }
  SECTION("a finite value whose distances would overflow float32") {
    // 3e38 is a valid float; |x|^2 is not (an internal assertion once, exit 1).
    items.embeddings[2][0] = 3e38f;
    CHECK_THROWS_AS(retrieval::retrieve_knn(items, items, options), DataError);
    CHECK_THROWS_WITH(retrieval::retrieve_knn(items, items, options),
                      Catch::Contains("embedding row 2") && Catch::Contains("has norm inf, past the 1e+18"));
    items.embeddings[2][0] = 1e19f;
    CHECK_THROWS_WITH(retrieval::retrieve_knn(items, items, options), Catch::Contains("has norm 1e+19"));
    items.embeddings[2][0] = 1e6f;  // large, but far from overflowing
    CHECK_NOTHROW(retrieval::retrieve_knn(items, items, options));
  }
  SECTION("a duplicated gallery id") {
    items.ids[4] = 0;
    CHECK_THROWS_WITH(retrieval::retrieve_knn(items, items, options), Catch::Contains("occurs twice"));
  }
  SECTION("different dimensions") {
    auto other = random_set(5, 4, 2, 100, 1, false);
    CHECK_THROWS_AS(retrieval::retrieve_knn(items, other, options), DataError);
  }
  SECTION("double embeddings") {
    items.embeddings = items.embeddings.to(torch::kDouble);
    CHECK_THROWS_WITH(retrieval::retrieve_knn(items, items, options), Catch::Contains("float32"));
  }
}

}  // namespace retrieval_tests
