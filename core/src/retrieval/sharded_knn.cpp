#include "oml/retrieval/sharded_knn.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "oml/common/error.h"
#include "oml/distributed/process_group.h"
#include "oml/distributed/sync_dicts.h"
#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::retrieval {

namespace {

using distributed::SyncDict;

template <class T>
at::Tensor to_tensor(const std::vector<T>& values, at::ScalarType type) {
  return torch::tensor(at::ArrayRef<T>(values), torch::TensorOptions().dtype(type));
}

template <class T>
std::vector<T> to_vector(const distributed::SyncValue& value, int64_t begin, int64_t end) {
  const at::Tensor tensor = std::get<at::Tensor>(value).contiguous();
  OML_ASSERT(begin >= 0 && begin <= end && end <= tensor.size(0), "rows [", begin, ", ", end, ") of ",
             tensor.size(0));
  const T* data = tensor.data_ptr<T>();
  return std::vector<T>(data + begin, data + end);
}

template <class T>
std::vector<T> to_vector(const distributed::SyncValue& value) {
  return to_vector<T>(value, 0, std::get<at::Tensor>(value).size(0));
}

// Entries per query of a ragged result.
std::vector<int64_t> list_sizes(const RetrievalResults& results) {
  std::vector<int64_t> sizes(static_cast<std::size_t>(results.num_queries()));
  for (int64_t q = 0; q < results.num_queries(); ++q) sizes[q] = results.size(q);
  return sizes;
}

// A result without lists yet: labels and ids of the whole sets.
RetrievalResults labelled_result(const ItemSet& queries, const ItemSet& gallery) {
  RetrievalResults out;
  out.query_labels = queries.labels;
  out.gallery_labels = gallery.labels;
  out.query_ids = queries.ids;
  out.gallery_ids = gallery.ids;
  return out;
}

// This rank's progress over its share, shown as a fraction of the whole: every rank advances at
// about the same pace, and the bar must not reach the total before the lists are gathered.
ProgressCallback share_progress(const ProgressCallback& whole, int64_t total) {
  if (!whole) return {};
  return [whole, total](int64_t done, int64_t share_total) {
    if (done < share_total) whole(done * total / share_total, total);
  };
}

// Rank r searches its queries against the whole gallery: its lists are final.
RetrievalResults by_queries(distributed::ProcessGroup& group, const ItemSet& queries, const ItemSet& gallery,
                            const KnnOptions& options, const SearchShare& search) {
  const auto nq = static_cast<int64_t>(queries.ids.size());
  KnnOptions local = options;
  local.on_progress = share_progress(options.on_progress, nq);
  const ItemSet share = slice_items(queries, shard_of(nq, group.rank(), group.size()));
  const RetrievalResults part = search(share, gallery, local);
  OML_ASSERT(
      part.num_queries() == static_cast<int64_t>(share.ids.size()) && part.n_gt.size() == share.ids.size(),
      "the search of a share of ", share.ids.size(), " queries returned ", part.num_queries(), " lists and ",
      part.n_gt.size(), " ground-truth counts");

  const SyncDict all = distributed::sync_dicts(group, {{"sizes", to_tensor(list_sizes(part), at::kLong)},
                                                       {"retrieved", to_tensor(part.retrieved, at::kLong)},
                                                       {"distances", to_tensor(part.distances, at::kFloat)},
                                                       {"n_gt", to_tensor(part.n_gt, at::kLong)}});
  RetrievalResults out = labelled_result(queries, gallery);
  const std::vector<int64_t> sizes = to_vector<int64_t>(all.at("sizes"));
  OML_ASSERT(static_cast<int64_t>(sizes.size()) == nq, "gathered lists of ", sizes.size(),
             " queries, expected ", nq);
  out.offsets.assign(static_cast<std::size_t>(nq + 1), 0);
  for (int64_t q = 0; q < nq; ++q) out.offsets[q + 1] = out.offsets[q] + sizes[q];
  out.retrieved = to_vector<int64_t>(all.at("retrieved"));
  out.distances = to_vector<float>(all.at("distances"));
  out.n_gt = to_vector<int64_t>(all.at("n_gt"));
  return out;
}

// Checked on the whole sets by every rank, so that a bad row fails everywhere with the same
// message (a share would name its own row numbers, and the other ranks would wait for it).
void check_inputs(const ItemSet& queries, const ItemSet& gallery, const KnnOptions& options) {
  OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
  validate_item_set(queries, "query");
  validate_item_set(gallery, "gallery");
  OML_CHECK(queries.embeddings.size(1) == gallery.embeddings.size(1), DataError, "queries have dimension ",
            queries.embeddings.size(1), " but the gallery has ", gallery.embeddings.size(1));
}

// The gathered result, checked; the caller's progress reaches the total only now.
RetrievalResults finished(RetrievalResults out, const KnnOptions& options) {
  out.check_consistent();
  if (options.on_progress) options.on_progress(out.num_queries(), out.num_queries());
  return out;
}

// Rank r ranks every query against its gallery rows; the lists are merged by the exact key.
RetrievalResults by_gallery(distributed::ProcessGroup& group, const ItemSet& queries, const ItemSet& gallery,
                            const KnnOptions& options) {
  const auto nq = static_cast<int64_t>(queries.ids.size());
  const auto ng = static_cast<int64_t>(gallery.ids.size());
  // Over the whole gallery: n_gt, and a dataset index repeated in two shares is still caught.
  const IgnoredPairs ignored(queries, gallery);
  RetrievalResults out = labelled_result(queries, gallery);
  out.n_gt = count_ground_truth(queries, gallery, ignored);

  const RowRange mine = shard_of(ng, group.rank(), group.size());
  const ItemSet share = slice_items(gallery, mine);
  KnnOptions local = options;
  if (options.on_progress) {
    local.on_progress = [&options](int64_t done, int64_t total) {
      if (done < total) options.on_progress(done, total);
    };
  }
  const RetrievalResults part = retrieve_knn(queries, share, local);
  // The key retrieve_knn ordered by, recomputed by the same function: merging on the rounded float
  // distances could order two items of different shares differently than one process does.
  const detail::PreparedPair pair(queries, share, options.measure);
  std::vector<int64_t> positions(part.retrieved.size());
  std::vector<double> keys(part.retrieved.size());
  at::parallel_for(0, nq, 256, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      for (int64_t j = part.begin(q); j < part.end(q); ++j) {
        positions[j] = mine.begin + part.retrieved[j];
        keys[j] = pair.exact_key(q, part.retrieved[j]);
      }
    }
  });

  const SyncDict all = distributed::sync_dicts(group, {{"sizes", to_tensor(list_sizes(part), at::kLong)},
                                                       {"positions", to_tensor(positions, at::kLong)},
                                                       {"keys", to_tensor(keys, at::kDouble)}});
  std::vector<PartialLists> shares(static_cast<std::size_t>(group.size()));
  int64_t entry = 0;
  for (int r = 0; r < group.size(); ++r) {
    PartialLists& lists = shares[r];
    lists.sizes = to_vector<int64_t>(all.at("sizes"), r * nq, (r + 1) * nq);
    int64_t count = 0;
    for (const int64_t size : lists.sizes) count += size;
    lists.positions = to_vector<int64_t>(all.at("positions"), entry, entry + count);
    lists.keys = to_vector<double>(all.at("keys"), entry, entry + count);
    entry += count;
  }
  merge_partial_lists(shares, options.top_k, out, options.measure);
  return out;
}

}  // namespace

const char* axis_name(ShardAxis axis) { return axis == ShardAxis::queries ? "queries" : "gallery"; }

RowRange shard_of(int64_t n, int rank, int world) {
  OML_ASSERT(n >= 0 && world >= 1 && rank >= 0 && rank < world, "share ", rank, " of ", world, " of ", n,
             " rows");
  const int64_t base = n / world;
  const int64_t extra = n % world;
  RowRange range;
  range.begin = rank * base + std::min<int64_t>(rank, extra);
  range.end = range.begin + base + (rank < extra ? 1 : 0);
  return range;
}

ItemSet slice_items(const ItemSet& items, RowRange rows) {
  auto part = [rows](const std::vector<int64_t>& values) {
    if (values.empty()) return values;
    return std::vector<int64_t>(values.begin() + rows.begin, values.begin() + rows.end);
  };
  ItemSet out;
  out.embeddings = items.embeddings.narrow(0, rows.begin, rows.size());
  out.labels = part(items.labels);
  out.ids = part(items.ids);
  out.sequences = part(items.sequences);
  return out;
}

void merge_partial_lists(const std::vector<PartialLists>& shares, int64_t top_k, RetrievalResults& out,
                         Measure measure) {
  OML_ASSERT(!shares.empty() && top_k > 0, shares.size(), " shares, top_k ", top_k);
  const auto nq = static_cast<int64_t>(shares.front().sizes.size());
  const auto num_shares = static_cast<int64_t>(shares.size());
  // Where each query's list starts in each share; every list must ascend by the merge key.
  std::vector<std::vector<int64_t>> starts(shares.size(), std::vector<int64_t>(nq + 1, 0));
  for (int64_t s = 0; s < num_shares; ++s) {
    const PartialLists& share = shares[s];
    OML_ASSERT(static_cast<int64_t>(share.sizes.size()) == nq, "share ", s, " has lists of ",
               share.sizes.size(), " queries, share 0 of ", nq);
    for (int64_t q = 0; q < nq; ++q) starts[s][q + 1] = starts[s][q] + share.sizes[q];
    OML_ASSERT(static_cast<int64_t>(share.positions.size()) == starts[s][nq] &&
                   share.keys.size() == share.positions.size(),
               "share ", s, ": ", starts[s][nq], " list entries but ", share.positions.size(),
               " positions and ", share.keys.size(), " distances");
    for (int64_t q = 0; q < nq; ++q) {
      for (int64_t j = starts[s][q] + 1; j < starts[s][q + 1]; ++j) {
        OML_ASSERT(std::make_pair(share.keys[j - 1], share.positions[j - 1]) <
                       std::make_pair(share.keys[j], share.positions[j]),
                   "share ", s, ": the list of query ", q, " is not sorted");
      }
    }
  }

  out.offsets.assign(static_cast<std::size_t>(nq + 1), 0);
  for (int64_t q = 0; q < nq; ++q) {
    int64_t available = 0;
    for (int64_t s = 0; s < num_shares; ++s) available += shares[s].sizes[q];
    out.offsets[q + 1] = out.offsets[q] + std::min(top_k, available);
  }
  out.retrieved.assign(static_cast<std::size_t>(out.offsets.back()), -1);
  out.distances.assign(static_cast<std::size_t>(out.offsets.back()), 0.0f);
  at::parallel_for(0, nq, 256, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> cursor(shares.size());
    for (int64_t q = begin; q < end; ++q) {
      for (int64_t s = 0; s < num_shares; ++s) cursor[s] = starts[s][q];
      for (int64_t i = out.offsets[q]; i < out.offsets[q + 1]; ++i) {
        int64_t best = -1;  // the share whose next entry is smallest by (key, position)
        for (int64_t s = 0; s < num_shares; ++s) {
          if (cursor[s] == starts[s][q + 1]) continue;
          if (best < 0 ||
              std::make_pair(shares[s].keys[cursor[s]], shares[s].positions[cursor[s]]) <
                  std::make_pair(shares[best].keys[cursor[best]], shares[best].positions[cursor[best]])) {
            best = s;
          }
        }
        out.retrieved[i] = shares[best].positions[cursor[best]];
        out.distances[i] =
            static_cast<float>(detail::distance_of_key(measure, shares[best].keys[cursor[best]]));
        ++cursor[best];
      }
    }
  });
}

RetrievalResults retrieve_sharded_by_queries(distributed::ProcessGroup& group, const ItemSet& queries,
                                             const ItemSet& gallery, const KnnOptions& options,
                                             const SearchShare& search) {
  if (group.size() == 1) return search(queries, gallery, options);
  check_inputs(queries, gallery, options);
  return finished(by_queries(group, queries, gallery, options, search), options);
}

RetrievalResults retrieve_knn_sharded(distributed::ProcessGroup& group, const ItemSet& queries,
                                      const ItemSet& gallery, const KnnOptions& options, ShardAxis axis) {
  if (group.size() == 1) return retrieve_knn(queries, gallery, options);
  check_inputs(queries, gallery, options);
  if (axis == ShardAxis::queries)
    return finished(by_queries(group, queries, gallery, options, retrieve_knn), options);
  return finished(by_gallery(group, queries, gallery, options), options);
}

}  // namespace oml::retrieval
