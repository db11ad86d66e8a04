#pragma once
// Internal: FaissGalleryIndex, a Faiss index over one gallery (oml/retrieval/gallery_index.h):
// the CPU index, which add() / remove() change and write() saves, and with GPU Faiss its copy on
// the GPU, which is searched. Made by FaissBackend (backend.h) for every kind.

#include <faiss/Index.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/retrieval/backend.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/gallery_index.h"

namespace oml::retrieval::detail {

class FaissBackend;
struct SearchState;

class FaissGalleryIndex final : public GalleryIndex {
 public:
  /// `index`: the gallery's index built by `backend` (null for an empty gallery), searched with
  /// `refine` x k candidates; `tuned`: what target_recall reached; `measure`: what it was built for.
  FaissGalleryIndex(const FaissBackend& backend, ItemSet gallery, std::unique_ptr<faiss::Index> index,
                    int64_t refine, std::optional<RecallEstimate> tuned, Measure measure);
  ~FaissGalleryIndex() override;

  RetrievalResults search(const ItemSet& queries, const KnnOptions& options) const override;
  IndexUpdates remove_updates() const override;
  bool write(const std::filesystem::path& file) const override;
  std::map<std::string, int64_t> search_parameters() const override;
  std::optional<RecallEstimate> tuned_recall() const override { return tuned_; }
  std::string describe() const override;

 protected:
  void added(int64_t first) override;
  void removed(const std::vector<int64_t>& removed) override;

 private:
  const faiss::Index& searched() const { return on_device_ ? *on_device_ : *index_; }
  // After index_ or on_device_ changed: the search state made again for the searched index.
  void index_changed();

  const FaissBackend& backend_;
  std::unique_ptr<faiss::Index> index_;
  std::unique_ptr<faiss::Index> on_device_;  // null: searched on the CPU
  // The searched index's search state (null: the kind keeps none, or the index is empty). Made
  // only by the constructor, added() and removed(), which the owner runs alone (gallery_index.h:
  // searches are const and may run at once; a change does not run beside them).
  std::unique_ptr<SearchState> state_;
  // The gallery's id positions and label counts, indexed once per gallery, not per search.
  std::unique_ptr<detail::PreparedGallery> prepared_;
  int64_t refine_;
  std::optional<RecallEstimate> tuned_;
  Measure measure_;  // what the index was built for (kept for an emptied one, which has no index_)
};

}  // namespace oml::retrieval::detail
