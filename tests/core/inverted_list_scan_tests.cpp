// The IVF list scan of faiss_ivf (`scan: blas`, retrieval/detail/inverted_list_scan.h), without
// Faiss: over hand-made inverted lists it must return, per query, the top k of the items of its
// probed lists by exact distance, without ignored pairs, whatever the block tiling.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/detail/inverted_list_scan.h"
#include "oml/retrieval/knn.h"
#include "support/support.h"

namespace inverted_list_scan_tests {

using namespace oml;
using retrieval::detail::InvertedList;
using retrieval::detail::InvertedListScanner;
using retrieval::detail::ListScanShape;

namespace {

// A gallery split into lists of the given sizes (positions shuffled over the lists, as k-means
// assignment would), with the storage the views point into.
struct Lists {
  std::vector<std::vector<float>> vectors;
  std::vector<std::vector<int64_t>> positions;
  std::vector<InvertedList> views;
};

Lists make_lists(const at::Tensor& gallery, const std::vector<int64_t>& sizes, uint64_t seed) {
  const int64_t n = gallery.size(0);
  const int64_t dim = gallery.size(1);
  REQUIRE(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == n);
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  Lists lists;
  int64_t next = 0;
  for (const int64_t size : sizes) {
    lists.vectors.emplace_back();
    lists.positions.emplace_back();
    for (int64_t i = 0; i < size; ++i, ++next) {
      const float* row = gallery.data_ptr<float>() + order[next] * dim;
      lists.vectors.back().insert(lists.vectors.back().end(), row, row + dim);
      lists.positions.back().push_back(order[next]);
    }
  }
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    lists.views.push_back({sizes[l], lists.vectors[l].data(), lists.positions[l].data()});
  }
  return lists;
}

retrieval::ItemSet items_of(const at::Tensor& embeddings, int64_t first_id) {
  retrieval::ItemSet set;
  set.embeddings = embeddings;
  for (int64_t i = 0; i < embeddings.size(0); ++i) {
    set.labels.push_back(i % 7);
    set.ids.push_back(first_id + i);
  }
  return set;
}

// What the scan must return for query q: the items of its probed lists, ignored pairs dropped,
// by (exact key: squared distance or -q.g, position), at most k.
std::vector<std::pair<double, int64_t>> expected_list(
    const at::Tensor& queries, int64_t q, const Lists& lists, const std::vector<int64_t>& probes,
    int64_t nprobe, const retrieval::IgnoredPairs& ignored, int64_t k,
    retrieval::Measure measure = retrieval::Measure::euclidean) {
  const int64_t dim = queries.size(1);
  std::vector<std::pair<double, int64_t>> all;
  for (int64_t j = 0; j < nprobe; ++j) {
    const int64_t l = probes[q * nprobe + j];
    if (l < 0) continue;
    for (int64_t i = 0; i < lists.views[l].size; ++i) {
      const int64_t position = lists.views[l].positions[i];
      if (ignored.contains(q, position)) continue;
      all.emplace_back(retrieval::detail::exact_key(measure, queries.data_ptr<float>() + q * dim,
                                                    lists.views[l].vectors + i * dim, dim),
                       position);
    }
  }
  std::sort(all.begin(), all.end());
  all.resize(std::min<std::size_t>(all.size(), static_cast<std::size_t>(k)));
  return all;
}

}  // namespace

TEST_CASE("The BLAS list scan returns the top k of the probed lists by exact distance or inner product",
          "[retrieval][ivf]") {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t dim = 12;
  const at::Tensor gallery = torch::randn({400, dim}, generator);
  // Queries 0..59 are gallery items 0..59 (same ids: the query itself is ignored), 60..79 are new.
  const at::Tensor queries =
      torch::cat({gallery.narrow(0, 0, 60), torch::randn({20, dim}, generator)}).contiguous();
  auto query_set = items_of(queries, 0);
  const auto gallery_set = items_of(gallery, 0);
  for (int64_t i = 60; i < 80; ++i) query_set.ids[i] = 1000 + i;  // not in the gallery
  const retrieval::IgnoredPairs ignored(query_set, gallery_set);
  // Lists of very different sizes, one empty, one larger than a column tile below.
  const Lists lists = make_lists(gallery, {0, 3, 150, 40, 1, 90, 60, 56}, 5);
  const int64_t nprobe = 3;
  std::vector<int64_t> probes;
  std::mt19937_64 rng(9);
  for (int64_t q = 0; q < queries.size(0); ++q) {
    std::vector<int64_t> l(lists.views.size());
    std::iota(l.begin(), l.end(), 0);
    std::shuffle(l.begin(), l.end(), rng);
    probes.insert(probes.end(), l.begin(), l.begin() + nprobe);
    if (q % 10 == 0) probes.back() = -1;  // Faiss pads with -1 when it has fewer lists
  }

  const int64_t k = 9;
  for (const auto measure : {retrieval::Measure::euclidean, retrieval::Measure::negative_dot})
    for (const ListScanShape shape : {ListScanShape{}, ListScanShape{3, 5}, ListScanShape{7, 200}}) {
      INFO("row_tile " << shape.row_tile << ", column_tile " << shape.column_tile << ", inner product "
                       << (measure == retrieval::Measure::negative_dot));
      const InvertedListScanner scanner(lists.views, dim, measure, shape);
      retrieval::RetrievalResults out;
      out.offsets = {0};
      // In two chunks, as the backend calls it: the second chunk's queries start at 50.
      scanner.scan(queries.data_ptr<float>(), 50, 0, probes.data(), nprobe, ignored, k, out);
      scanner.scan(queries.data_ptr<float>() + 50 * dim, 30, 50, probes.data() + 50 * nprobe, nprobe, ignored,
                   k, out);
      REQUIRE(out.num_queries() == 80);
      for (int64_t q = 0; q < 80; ++q) {
        INFO("query " << q);
        const auto expected = expected_list(queries, q, lists, probes, nprobe, ignored, k, measure);
        REQUIRE(out.size(q) == static_cast<int64_t>(expected.size()));
        for (int64_t i = 0; i < out.size(q); ++i) {
          CHECK(out.retrieved[out.begin(q) + i] == expected[i].second);
          CHECK(out.distances[out.begin(q) + i] ==
                static_cast<float>(retrieval::detail::distance_of_key(measure, expected[i].first)));
        }
      }
    }
}

TEST_CASE("A query's list from the BLAS list scan does not depend on the queries scanned with it",
          "[retrieval][ivf]") {
  // What the split over ranks needs: one call for all queries, calls of one query each (a
  // single-row multiply takes another BLAS kernel), and uneven chunks give the same bits.
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(13);
  const int64_t dim = 32;
  const at::Tensor gallery = torch::randn({600, dim}, generator);
  const at::Tensor queries = torch::randn({90, dim}, generator).contiguous();
  const auto query_set = items_of(queries, 10000);
  const auto gallery_set = items_of(gallery, 0);
  const retrieval::IgnoredPairs ignored(query_set, gallery_set);
  const Lists lists = make_lists(gallery, std::vector<int64_t>(12, 50), 3);
  const int64_t nprobe = 4;
  std::vector<int64_t> probes;
  for (int64_t q = 0; q < 90; ++q) {
    for (int64_t j = 0; j < nprobe; ++j) probes.push_back((q * 7 + j * 5) % 12);
  }
  const InvertedListScanner scanner(lists.views, dim);
  auto scan_in = [&](const std::vector<int64_t>& cuts) {
    retrieval::RetrievalResults out;
    out.offsets = {0};
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      scanner.scan(queries.data_ptr<float>() + cuts[c] * dim, cuts[c + 1] - cuts[c], cuts[c],
                   probes.data() + cuts[c] * nprobe, nprobe, ignored, 10, out);
    }
    return out;
  };
  const auto whole = scan_in({0, 90});
  std::vector<int64_t> one_by_one(91);
  std::iota(one_by_one.begin(), one_by_one.end(), 0);
  for (const auto& cuts : {one_by_one, std::vector<int64_t>{0, 1, 2, 45, 46, 89, 90}}) {
    const auto split = scan_in(cuts);
    CHECK(split.offsets == whole.offsets);
    CHECK(split.retrieved == whole.retrieved);
    CHECK(split.distances == whole.distances);
  }
}

TEST_CASE("The BLAS list scan returns short lists when the probed lists hold fewer than k items",
          "[retrieval][ivf]") {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(12);
  const at::Tensor gallery = torch::randn({10, 4}, generator);
  const Lists lists = make_lists(gallery, {2, 3, 5}, 1);
  const auto set = items_of(gallery, 0);
  const retrieval::IgnoredPairs ignored(set, set);
  const InvertedListScanner scanner(lists.views, 4);
  // Every query probes list 1 (3 items) only; a query that is in list 1 keeps 2 (itself ignored).
  const std::vector<int64_t> probes(10, 1);
  retrieval::RetrievalResults out;
  out.offsets = {0};
  scanner.scan(gallery.data_ptr<float>(), 10, 0, probes.data(), 1, ignored, 5, out);
  for (int64_t q = 0; q < 10; ++q) {
    const bool in_list = std::count(lists.positions[1].begin(), lists.positions[1].end(), q) == 1;
    CHECK(out.size(q) == (in_list ? 2 : 3));
  }
}

}  // namespace inverted_list_scan_tests
