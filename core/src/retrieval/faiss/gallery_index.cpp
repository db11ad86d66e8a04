// FaissGalleryIndex (gallery_index.h): a built Faiss index searched, written, added to and
// removed from.
#include "gallery_index.h"

#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>

#include "backend.h"
#include "oml/common/error.h"

namespace oml::retrieval::detail {

FaissGalleryIndex::FaissGalleryIndex(const FaissBackend& backend, ItemSet gallery,
                                     std::unique_ptr<faiss::Index> index, int64_t refine,
                                     std::optional<RecallEstimate> tuned, Measure measure)
    : GalleryIndex(std::move(gallery)),
      backend_(backend),
      index_(std::move(index)),
      refine_(refine),
      tuned_(tuned),
      measure_(measure) {
  if (index_) on_device_ = backend_.copy_to_device(*index_);
  prepared_ = std::make_unique<detail::PreparedGallery>(this->gallery(), /*with_norms=*/false);
  index_changed();
}

// Here, where SearchState is complete.
FaissGalleryIndex::~FaissGalleryIndex() = default;

void FaissGalleryIndex::index_changed() { state_ = index_ ? backend_.search_state(searched()) : nullptr; }

RetrievalResults FaissGalleryIndex::search(const ItemSet& queries, const KnnOptions& options) const {
  if (!index_) {  // an empty gallery: no lists
    OML_ASSERT(options.measure == measure_, "an index built for one measure searched by the other");
    RetrievalResults out = retrieve_knn(queries, gallery(), options);
    return out;
  }
  return backend_.search_built(searched(), refine_, queries, gallery(), options, prepared_.get(),
                               state_.get());
}

IndexUpdates FaissGalleryIndex::remove_updates() const { return backend_.remove_updates(); }

bool FaissGalleryIndex::write(const std::filesystem::path& file) const {
  if (!index_ || !backend_.writes_index()) return false;
  try {
    faiss::write_index(index_.get(), file.c_str());
  } catch (const faiss::FaissException& e) {
    throw RuntimeError("cannot write the Faiss index to " + file.string() + ": " + e.what());
  }
  return true;
}

std::map<std::string, int64_t> FaissGalleryIndex::search_parameters() const {
  return index_ ? backend_.parameters(*index_, refine_) : std::map<std::string, int64_t>{};
}

std::string FaissGalleryIndex::describe() const {
  std::string out = backend_.name();
  for (const auto& [key, value] : search_parameters()) out += " " + key + "=" + std::to_string(value);
  if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index_.get())) {
    out += " nlist=" + std::to_string(ivf->nlist);
  }
  return out;
}

void FaissGalleryIndex::added(int64_t first) {
  // The state may point into lists the change reallocates: gone before, made again after.
  state_.reset();
  prepared_ = std::make_unique<detail::PreparedGallery>(gallery(), /*with_norms=*/false);
  const at::Tensor& g = gallery().embeddings;
  try {
    if (!index_) {  // the first items of an emptied (or empty) gallery: build as new
      const std::map<std::string, int64_t> kept = search_parameters();
      index_ = backend_.rebuilt(g, measure_);
      backend_.apply_parameters(*index_, refine_, kept);
    } else {
      OML_ASSERT(index_->ntotal == first, "the Faiss index holds ", index_->ntotal, " rows, the gallery had ",
                 first);
      index_->add(g.size(0) - first, g.data_ptr<float>() + first * g.size(1));
    }
    on_device_ = backend_.copy_to_device(*index_);
    index_changed();
  } catch (const faiss::FaissException& e) {
    throw RuntimeError("retrieval backend '" + backend_.name() + "': Faiss failed to add items: " + e.what());
  }
}

void FaissGalleryIndex::removed(const std::vector<int64_t>& removed) {
  state_.reset();  // as in added()
  prepared_ = std::make_unique<detail::PreparedGallery>(gallery(), /*with_norms=*/false);
  if (!index_) return;
  try {
    if (size() == 0) {
      index_.reset();
      on_device_.reset();
      return;
    }
    if (backend_.remove_updates() == IndexUpdates::kRebuild) {
      const std::map<std::string, int64_t> kept = search_parameters();
      index_ = backend_.rebuilt(gallery().embeddings, measure_);
      backend_.apply_parameters(*index_, refine_, kept);
    } else {
      index_ = backend_.without_rows(std::move(index_), removed, gallery().embeddings);
    }
    on_device_ = backend_.copy_to_device(*index_);
    index_changed();
  } catch (const faiss::FaissException& e) {
    throw RuntimeError("retrieval backend '" + backend_.name() +
                       "': Faiss failed to remove items: " + e.what());
  }
}

}  // namespace oml::retrieval::detail
