// Gallery indexes: the changes every kind shares (the gallery's rows), and the index that
// searches with its backend each time (exact, plugin backends).
#include "oml/retrieval/gallery_index.h"

#include <ATen/ATen.h>

#include <algorithm>

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
  gallery_.embeddings = first == 0 ? rows.clone() : at::cat({gallery_.embeddings, rows}).contiguous();
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
  const at::Tensor rows = at::from_blob(kept.data(), {static_cast<int64_t>(kept.size())}, at::kLong);
  gallery_.embeddings = gallery_.embeddings.index_select(0, rows).contiguous();
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
