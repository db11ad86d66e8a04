#pragma once
// A gallery index: one backend's search structure over one gallery, built once and searched by
// many batches of queries — what `oml-index` saves and `oml-search` loads (docs/serving.md).
//
//   auto backend = registries().retrieval_backends.create(spec, {seed});
//   std::unique_ptr<GalleryIndex> index = backend->build_index(gallery, {/*top_k=*/10});
//   RetrievalResults top = index->search(queries, {/*top_k=*/10});
//   index->add(new_items);          // appended at positions size()..
//   index->remove({3, 17});         // later rows move up
//   index->write("faiss.index");    // the kind's own structure, if it has one
//
// The backend must outlive its indexes. Results follow RetrievalBackend::search's contract
// (positions into gallery(), ascending distances of the measure the index was built for — Euclidean,
// or -q.g — ignored pairs dropped); searching an
// index equals the backend's search() over the same gallery with the same search parameters.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval {

/// How an index follows add() and remove().
enum class IndexUpdates {
  kIncremental,  ///< the structure is changed in place (exact, faiss_flat, IVF kinds)
  kRebuild,      ///< the structure is built again over the changed gallery (faiss_hnsw's remove)
};

class GalleryIndex {
 public:
  virtual ~GalleryIndex() = default;

  /// Per query at most options.top_k positions of gallery(). The search parameters are the
  /// index's (chosen at build), whatever options.top_k is.
  virtual RetrievalResults search(const ItemSet& queries, const KnnOptions& options) const = 0;

  /// The gallery searched; row i is position i of the results.
  const ItemSet& gallery() const { return gallery_; }
  int64_t size() const { return gallery_.embeddings.defined() ? gallery_.embeddings.size(0) : 0; }

  /// Appends `items` (same dimension; checked) at positions size()... The rows live in a buffer
  /// with room to grow (half again as many rows when it is full), so that adding k items costs
  /// O(k) amortized, not a copy of the gallery; the first add copies a gallery it does not own
  /// (a memory-mapped file's rows are never written).
  void add(const ItemSet& items);
  /// Removes the rows at `positions` (each in [0, size()), any order, duplicates ignored); the
  /// rows after them move up, keeping their order — in place in the buffer add() grew.
  void remove(std::vector<int64_t> positions);
  /// How add() / remove() change the structure.
  virtual IndexUpdates add_updates() const { return IndexUpdates::kIncremental; }
  virtual IndexUpdates remove_updates() const { return IndexUpdates::kIncremental; }

  /// Writes the kind's own structure to `file` (Faiss's write_index) and returns true; false
  /// where the embeddings are the whole index (exact, faiss_flat).
  virtual bool write(const std::filesystem::path& file) const {
    (void)file;
    return false;
  }
  /// The search parameters the index searches with, as chosen at build (target_recall) or
  /// given by the args: {"nprobe": 58}; what load_index() restores. Empty for exact.
  virtual std::map<std::string, int64_t> search_parameters() const { return {}; }
  /// The recall target_recall reached when the index was built (nullopt: not tuned, or loaded).
  virtual std::optional<RecallEstimate> tuned_recall() const { return std::nullopt; }
  /// The backend with its effective parameters ("faiss_ivf nlist=490 nprobe=58").
  virtual std::string describe() const = 0;

 protected:
  explicit GalleryIndex(ItemSet gallery);

  /// The structure's part of add(): gallery() already holds the new rows at [first, size()).
  virtual void added(int64_t first) = 0;
  /// The structure's part of remove(): `removed` (ascending, distinct) were positions of the
  /// gallery before; gallery() already lacks them.
  virtual void removed(const std::vector<int64_t>& removed) = 0;

 private:
  ItemSet gallery_;
  // The rows' buffer once add() or remove() made one: [capacity, D], gallery_.embeddings its
  // first size() rows. Undefined while the rows are the caller's (or a mapped file's).
  at::Tensor storage_;
};

/// An index that searches with RetrievalBackend::search over its gallery at every call: the
/// `exact` backend's (its embeddings are its index) and any plugin backend's without its own.
std::unique_ptr<GalleryIndex> make_search_each_time_index(const RetrievalBackend& backend, ItemSet gallery);

}  // namespace oml::retrieval
