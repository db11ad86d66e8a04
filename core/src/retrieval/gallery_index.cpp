// Gallery indexes: the changes every kind shares (the gallery's rows), and the index that
// searches with its backend each time (exact, plugin backends).
#include "oml/retrieval/gallery_index.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "oml/common/error.h"

namespace oml::retrieval {

// The gallery is checked by the caller (as for RetrievalBackend::search): checking it here again
// would read a memory-mapped gallery twice.
GalleryIndex::GalleryIndex(ItemSet gallery) : gallery_(std::move(gallery)) {}

void GalleryIndex::add(const ItemSet& items) {
  validate_item_set(items, "added items");
  const int64_t first = size();
  const int64_t n = items.embeddings.size(0);
  if (n == 0) return;
  if (first > 0) {
    OML_CHECK(items.embeddings.size(1) == gallery_.embeddings.size(1), DataError,
              "added items have dimension ", items.embeddings.size(1), " but the gallery has ",
              gallery_.embeddings.size(1));
  }
  const at::Tensor rows = items.embeddings.to(at::kFloat).contiguous();
  const int64_t needed = first + n;
  if (!storage_.defined() || storage_.size(0) < needed || storage_.size(1) != rows.size(1)) {
    // Half again as many rows as needed: k adds in a row copy the gallery O(log) times.
    const int64_t capacity = std::max<int64_t>(needed, first + first / 2);
    at::Tensor grown = at::empty({capacity, rows.size(1)}, rows.options());
    if (first > 0) grown.narrow(0, 0, first).copy_(gallery_.embeddings);
    storage_ = grown;
  }
  storage_.narrow(0, first, n).copy_(rows);
  gallery_.embeddings = storage_.narrow(0, 0, needed);
  gallery_.labels.insert(gallery_.labels.end(), items.labels.begin(), items.labels.end());
  gallery_.ids.insert(gallery_.ids.end(), items.ids.begin(), items.ids.end());
  // A gallery keeps sequences when either side has them; -1 = none.
  if (!gallery_.sequences.empty() || !items.sequences.empty()) {
    gallery_.sequences.resize(static_cast<std::size_t>(first), -1);
    if (items.sequences.empty()) {
      gallery_.sequences.resize(static_cast<std::size_t>(first + n), -1);
    } else {
      gallery_.sequences.insert(gallery_.sequences.end(), items.sequences.begin(), items.sequences.end());
    }
  }
  added(first);
}

void GalleryIndex::remove(std::vector<int64_t> positions) {
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  if (positions.empty()) return;
  const int64_t n = size();
  OML_CHECK(positions.front() >= 0 && positions.back() < n, DataError, "position ",
            positions.front() < 0 ? positions.front() : positions.back(), " is not in the gallery of ", n,
            " items");
  std::vector<int64_t> kept;
  kept.reserve(static_cast<std::size_t>(n) - positions.size());
  auto next_removed = positions.begin();
  for (int64_t i = 0; i < n; ++i) {
    if (next_removed != positions.end() && *next_removed == i) {
      ++next_removed;
    } else {
      kept.push_back(i);
    }
  }
  const auto keep = [&](std::vector<int64_t>& values) {
    if (values.empty()) return;
    std::vector<int64_t> out;
    out.reserve(kept.size());
    for (const int64_t i : kept) out.push_back(values[static_cast<std::size_t>(i)]);
    values = std::move(out);
  };
  const auto remaining = static_cast<int64_t>(kept.size());
  if (!storage_.defined()) {  // the rows are not ours (a mapped file, the caller's): a new buffer
    const at::Tensor rows = at::from_blob(kept.data(), {remaining}, at::kLong);
    storage_ = gallery_.embeddings.index_select(0, rows).contiguous();
  } else {  // in place: each run of kept rows after a removed one moves up over the gap
    const int64_t dim = storage_.size(1);
    float* data = storage_.data_ptr<float>();
    int64_t write = positions.front();
    for (std::size_t j = 0; j < positions.size(); ++j) {
      const int64_t from = positions[j] + 1;
      const int64_t to = j + 1 < positions.size() ? positions[j + 1] : n;
      if (to > from) {
        std::memmove(data + write * dim, data + from * dim,
                     sizeof(float) * static_cast<std::size_t>((to - from) * dim));
        write += to - from;
      }
    }
  }
  gallery_.embeddings = storage_.narrow(0, 0, remaining);
  keep(gallery_.labels);
  keep(gallery_.ids);
  keep(gallery_.sequences);
  removed(positions);
}

namespace {

class SearchEachTimeIndex final : public GalleryIndex {
 public:
  SearchEachTimeIndex(const RetrievalBackend& backend, ItemSet gallery)
      : GalleryIndex(std::move(gallery)), backend_(backend) {}

  RetrievalResults search(const ItemSet& queries, const KnnOptions& options) const override {
    return backend_.search(queries, gallery(), options);
  }
  std::string describe() const override { return backend_.describe(); }

 protected:
  void added(int64_t) override {}
  void removed(const std::vector<int64_t>&) override {}

 private:
  const RetrievalBackend& backend_;
};

}  // namespace

std::unique_ptr<GalleryIndex> make_search_each_time_index(const RetrievalBackend& backend, ItemSet gallery) {
  return std::make_unique<SearchEachTimeIndex>(backend, std::move(gallery));
}

std::unique_ptr<GalleryIndex> RetrievalBackend::build_index(ItemSet gallery, const KnnOptions&) const {
  return make_search_each_time_index(*this, std::move(gallery));
}

std::unique_ptr<GalleryIndex> RetrievalBackend::load_index(ItemSet gallery, const std::filesystem::path& file,
                                                           const std::map<std::string, int64_t>&,
                                                           Measure) const {
  OML_CHECK(file.empty(), DataError, file.string(), ": retrieval backend '", name(),
            "' keeps no index file of its own; this index was written by another backend");
  return make_search_each_time_index(*this, std::move(gallery));
}

}  // namespace oml::retrieval
