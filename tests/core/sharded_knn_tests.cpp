// The pieces of the k-NN split over ranks (oml/retrieval/sharded_knn.h) in one process: the
// shares, and the merge of per-gallery-share lists, which must give retrieve_knn's lists on the
// whole gallery exactly — ties included. The multi-process runs are in
// tests/integration/sharded_knn_tests.cpp.
#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/distributed/process_group.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/sharded_knn.h"
#include "support/support.h"

namespace sharded_knn_tests {

using namespace oml;

namespace {

// Small integer coordinates: many pairs at exactly the same distance, so the order of equal
// distances (by gallery position) decides the lists, across shares too.
retrieval::ItemSet tied_set(int64_t n, int64_t first_id, uint64_t seed, bool with_sequences) {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  retrieval::ItemSet set;
  set.embeddings = torch::randint(0, 3, {n, 5}, generator).to(torch::kFloat);
  const auto labels = torch::randint(0, 7, {n}, generator);
  for (int64_t i = 0; i < n; ++i) {
    set.labels.push_back(labels[i].item<int64_t>());
    set.ids.push_back(first_id + i);
    if (with_sequences) set.sequences.push_back(i % 4 == 3 ? -1 : (i / 3) % 9);
  }
  return set;
}

void check_same(const retrieval::RetrievalResults& actual, const retrieval::RetrievalResults& expected) {
  actual.check_consistent();
  CHECK(actual.offsets == expected.offsets);
  CHECK(actual.retrieved == expected.retrieved);
  CHECK(actual.distances == expected.distances);  // bit for bit
  CHECK(actual.n_gt == expected.n_gt);
  CHECK(actual.query_labels == expected.query_labels);
  CHECK(actual.gallery_labels == expected.gallery_labels);
  CHECK(actual.query_ids == expected.query_ids);
  CHECK(actual.gallery_ids == expected.gallery_ids);
}

// What ShardAxis::gallery does on W ranks, here one share after the other.
retrieval::RetrievalResults merged_over_gallery_shares(const retrieval::ItemSet& queries,
                                                       const retrieval::ItemSet& gallery,
                                                       const retrieval::KnnOptions& options, int world) {
  const auto ng = static_cast<int64_t>(gallery.ids.size());
  std::vector<retrieval::PartialLists> shares;
  for (int rank = 0; rank < world; ++rank) {
    const retrieval::RowRange rows = retrieval::shard_of(ng, rank, world);
    const retrieval::ItemSet share = retrieval::slice_items(gallery, rows);
    const auto part = retrieval::retrieve_knn(queries, share, options);
    const retrieval::detail::PreparedPair pair(queries, share, options.measure);
    retrieval::PartialLists lists;
    for (int64_t q = 0; q < part.num_queries(); ++q) {
      lists.sizes.push_back(part.size(q));
      for (int64_t j = part.begin(q); j < part.end(q); ++j) {
        lists.positions.push_back(rows.begin + part.retrieved[j]);
        lists.keys.push_back(pair.exact_key(q, part.retrieved[j]));
      }
    }
    shares.push_back(std::move(lists));
  }
  retrieval::RetrievalResults out = retrieval::retrieve_knn(queries, gallery, options);  // labels, n_gt
  retrieval::merge_partial_lists(shares, options.top_k, out, options.measure);
  return out;
}

}  // namespace

TEST_CASE("Shares of rows are contiguous, in rank order, and differ in size by at most one", "[retrieval]") {
  for (int world = 1; world <= 4; ++world) {
    for (int64_t n = 0; n <= 11; ++n) {
      INFO("n " << n << ", world " << world);
      int64_t next = 0;
      for (int rank = 0; rank < world; ++rank) {
        const retrieval::RowRange rows = retrieval::shard_of(n, rank, world);
        CHECK(rows.begin == next);
        CHECK((rows.size() == n / world || rows.size() == n / world + 1));
        CHECK(rows.size() >= retrieval::shard_of(n, world - 1, world).size());
        next = rows.end;
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("A slice of an item set keeps its rows' embeddings, labels, ids and sequences", "[retrieval]") {
  const auto items = tied_set(10, 100, 1, true);
  const auto slice = retrieval::slice_items(items, {3, 7});
  CHECK(torch::equal(slice.embeddings, items.embeddings.narrow(0, 3, 4)));
  CHECK(slice.ids == std::vector<int64_t>{103, 104, 105, 106});
  CHECK(slice.labels == std::vector<int64_t>(items.labels.begin() + 3, items.labels.begin() + 7));
  CHECK(slice.sequences == std::vector<int64_t>(items.sequences.begin() + 3, items.sequences.begin() + 7));
  CHECK(retrieval::slice_items(tied_set(4, 0, 2, false), {1, 1}).embeddings.size(0) == 0);
}

TEST_CASE("Merging the lists of gallery shares gives the whole gallery's lists exactly, ties included",
          "[retrieval]") {
  // By Euclidean distance, and by -q.g (distance: dot), whose merge key is the inner product.
  const auto measure = GENERATE(retrieval::Measure::euclidean, retrieval::Measure::negative_dot);
  const bool with_sequences = GENERATE(false, true);
  const int64_t k = GENERATE(1, 4, 30);
  const auto gallery = tied_set(83, 0, 5, with_sequences);
  // Queries: part of the gallery (they must not retrieve themselves) and items of their own.
  auto queries = retrieval::slice_items(gallery, {40, 83});
  const auto extra = tied_set(9, 1000, 6, with_sequences);
  queries.embeddings = torch::cat({queries.embeddings, extra.embeddings});
  for (std::size_t i = 0; i < extra.ids.size(); ++i) {
    queries.ids.push_back(extra.ids[i]);
    queries.labels.push_back(extra.labels[i]);
    if (with_sequences) queries.sequences.push_back(extra.sequences[i]);
  }
  retrieval::KnnOptions options;
  options.top_k = k;
  options.query_chunk = 7;
  options.gallery_tile = 5;
  options.measure = measure;
  const auto expected = retrieval::retrieve_knn(queries, gallery, options);
  for (int world : {2, 3, 5, 100}) {  // 100 > 83: most shares are empty
    INFO("sequences " << with_sequences << ", k " << k << ", world " << world << ", inner product "
                      << (measure == retrieval::Measure::negative_dot));
    check_same(merged_over_gallery_shares(queries, gallery, options, world), expected);
  }
}

TEST_CASE("The merge rejects lists that disagree in query count or are not sorted", "[retrieval]") {
  retrieval::PartialLists a{{1, 1}, {0, 1}, {1.0, 2.0}};
  retrieval::PartialLists short_one{{1}, {2}, {1.0}};
  retrieval::RetrievalResults out;
  CHECK_THROWS_AS(retrieval::merge_partial_lists({a, short_one}, 2, out), InternalError);
  retrieval::PartialLists unsorted{{2, 0}, {5, 4}, {1.0, 1.0}};  // equal distances: position 4 first
  CHECK_THROWS_WITH(retrieval::merge_partial_lists({a, unsorted}, 2, out), Catch::Contains("not sorted"));
  retrieval::merge_partial_lists({a, retrieval::PartialLists{{0, 1}, {3}, {2.0}}}, 2, out);
  CHECK(out.offsets == std::vector<int64_t>{0, 1, 3});
  CHECK(out.retrieved == std::vector<int64_t>{0, 1, 3});
  CHECK(out.distances ==
        std::vector<float>{1.0f, static_cast<float>(std::sqrt(2.0)), static_cast<float>(std::sqrt(2.0))});
}

TEST_CASE("With a group of one the split k-NN is retrieve_knn", "[retrieval]") {
  const auto items = tied_set(50, 0, 9, true);
  retrieval::KnnOptions options;
  options.top_k = 6;
  auto group = distributed::ProcessGroup::single();
  for (const auto axis : {retrieval::ShardAxis::queries, retrieval::ShardAxis::gallery}) {
    check_same(retrieval::retrieve_knn_sharded(*group, items, items, options, axis),
               retrieval::retrieve_knn(items, items, options));
  }
}

TEST_CASE("With a group of one the split by queries calls the given search once with all queries",
          "[retrieval]") {
  const auto queries = tied_set(30, 0, 10, true);
  const auto gallery = tied_set(40, 20, 11, true);
  retrieval::KnnOptions options;
  options.top_k = 4;
  auto group = distributed::ProcessGroup::single();
  int calls = 0;
  const auto result = retrieval::retrieve_sharded_by_queries(
      *group, queries, gallery, options,
      [&calls](const retrieval::ItemSet& q, const retrieval::ItemSet& g, const retrieval::KnnOptions& o) {
        ++calls;
        CHECK(q.ids.size() == 30);
        CHECK(g.ids.size() == 40);
        return retrieval::retrieve_knn(q, g, o);
      });
  CHECK(calls == 1);
  check_same(result, retrieval::retrieve_knn(queries, gallery, options));
}

}  // namespace sharded_knn_tests
