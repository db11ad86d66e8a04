#pragma once
// Internal: FaissBackend, what the Faiss backends share — adding the gallery in chunks, training
// on a seeded sample, searching in chunks, re-ranking candidates exactly, target_recall
// (tuning.cpp), moving the index to a GPU — with one subclass per index kind (flat.cpp, ivf.cpp,
// hnsw.cpp, ivf_pq.cpp) that says how its index is made and searched, as Faiss's IndexIVF family
// does. Compiled only with Faiss (core/CMakeLists.txt).
//
// Distances are L2 like the exact backend's (cosine = L2 on normalised embeddings), or, under
// Measure::negative_dot (`distance: dot`), each kind's inner-product index (METRIC_INNER_PRODUCT)
// whose similarities s are reported as -s. The gallery is added in chunks and the queries
// searched in chunks, so a memory-mapped gallery is never copied whole (io/mapped_file.h releases
// what was read).

#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVF.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "oml/io/mapped_file.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/gallery_index.h"
#include "options.h"
#include "tuning.h"

namespace faiss::gpu {
class StandardGpuResources;  // GPU Faiss only (OML_HAVE_FAISS_GPU, backend.cpp)
}  // namespace faiss::gpu

namespace oml::retrieval::detail {

// faiss::idx_t is Faiss 1.7.4's spelling; Debian 12 ships 1.7.3.
using FaissId = faiss::Index::idx_t;
static_assert(sizeof(FaissId) == sizeof(int64_t), "Faiss ids are gallery positions (int64)");

/// The Faiss metric of each measure, and back: an index keeps its metric in its file.
faiss::MetricType metric_of(Measure measure);
Measure measure_of(const faiss::Index& index);
const char* measure_name(Measure measure);
/// A flat index of the measure: the exhaustive kind, and the IVF kinds' coarse quantizer.
faiss::IndexFlat* new_flat(FaissId dim, Measure measure);

/// Rows [begin, end) of a [N, D] float32 contiguous tensor, then released if memory-mapped.
template <class Fn>
void for_each_row_chunk(const at::Tensor& rows, int64_t chunk, Fn&& fn) {
  const int64_t n = rows.size(0);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    fn(begin, end);
    io::release_mapped_rows(rows, begin, end);
  }
}

/// The seeded sample of `n` of `ng` rows (partial Fisher-Yates), ascending so that a
/// memory-mapped gallery is read in order. `purpose` separates the streams (training, tuning).
std::vector<int64_t> sample_rows(int64_t ng, int64_t n, uint64_t seed, uint64_t purpose);

/// An index of one kind for one gallery, before the gallery is added.
struct PlannedIndex {
  std::unique_ptr<faiss::Index> index;
  std::string description;  // name and every parameter, as resolved for this gallery
  int64_t train_size = 0;   // rows of the gallery to train on (an index that needs training)
};

/// What a kind keeps of a built index between its searches, so that a search does not redo it:
/// IVF-Flat's list scanner with the norms of every list item (O(G D) to compute, against the
/// O(nprobe G / nlist D) of scanning one query's lists). It may point into the index's lists, so
/// it is made again whenever the index changes; searches only read it, so several may share it.
struct SearchState {
  virtual ~SearchState() = default;
};

class FaissBackend : public RetrievalBackend {
 public:
  FaissBackend(std::string name, ChunkOptions chunks, TuneOptions tune, uint64_t seed, int cuda_device);

  std::string name() const override { return name_; }
  bool supports(Measure) const override { return true; }  // L2 or inner-product indexes

  std::optional<RecallEstimate> tuned_recall() const override;

  RetrievalResults search(const ItemSet& queries, const ItemSet& gallery,
                          const KnnOptions& options) const override;

  std::unique_ptr<GalleryIndex> build_index(ItemSet gallery, const KnnOptions& options) const override;

  std::unique_ptr<GalleryIndex> load_index(ItemSet gallery, const std::filesystem::path& file,
                                           const std::map<std::string, int64_t>& parameters,
                                           Measure measure) const override;

  /// The results of `index` (built over `gallery`) for `queries`.
  /// `prepared`: the gallery's ids and labels indexed once (null: here); `state`: search_state()
  /// of `index` as it is now (null: made for this search where the kind needs one).
  RetrievalResults search_built(const faiss::Index& index, int64_t refine, const ItemSet& queries,
                                const ItemSet& gallery, const KnnOptions& options,
                                const detail::PreparedGallery* prepared = nullptr,
                                const SearchState* state = nullptr) const;

  /// What this kind keeps of the filled `index` between searches (SearchState); null: nothing.
  virtual std::unique_ptr<SearchState> search_state(const faiss::Index& index) const {
    (void)index;
    return nullptr;
  }

  /// Whether the index is worth a file of its own (false: faiss_flat, whose index is the
  /// embeddings).
  virtual bool writes_index() const { return true; }
  /// Whether `index` (read from a file) is this kind's.
  virtual bool holds_kind(const faiss::Index& index) const = 0;
  /// How remove() follows: in place (flat, IVF), or by building again (HNSW).
  virtual IndexUpdates remove_updates() const { return IndexUpdates::kIncremental; }

  /// `index` without the rows at `removed` (ascending positions of the gallery before), the
  /// later rows renumbered to their new positions; `g` is the gallery after.
  virtual std::unique_ptr<faiss::Index> without_rows(std::unique_ptr<faiss::Index> index,
                                                     const std::vector<int64_t>& removed,
                                                     const at::Tensor& g) const;

  /// The search parameters of `index` that a saved index keeps (nprobe, ef_search, refine).
  virtual std::map<std::string, int64_t> parameters(const faiss::Index& index, int64_t refine) const;

  /// Sets the parameters() of a loaded `index`; DataError for one this kind does not have.
  void apply_parameters(faiss::Index& index, int64_t& refine,
                        const std::map<std::string, int64_t>& values) const;

  /// A copy of the CPU `index` on the run's GPU where the build has GPU Faiss; null otherwise
  /// (searched on the CPU).
  std::unique_ptr<faiss::Index> copy_to_device(const faiss::Index& index) const;

  /// The CPU index rebuilt over `g` for `measure` (HNSW's remove, an emptied index's first add).
  std::unique_ptr<faiss::Index> rebuilt(const at::Tensor& g, Measure measure) const {
    return build(plan(g.size(0), g.size(1), measure), g);
  }

 protected:
  /// The index for a gallery of `ng` x `dim` searched by `measure` (parameters resolved;
  /// SettingError for args that do not fit this gallery).
  virtual PlannedIndex plan(int64_t ng, int64_t dim, Measure measure) const = 0;

  /// Searches the filled `index`: by default Faiss's search of refine x k candidates per
  /// query, re-ranked by exact distances when refine > 1. `state`: search_state(index), or null.
  virtual void search_index(const faiss::Index& index, const at::Tensor& q, const at::Tensor& g,
                            const IgnoredPairs& ignored, const KnnOptions& options, int64_t refine,
                            const SearchState* state, RetrievalResults& out) const {
    (void)state;
    search_refined(index, q, g, ignored, options, refine, out);
  }

  /// Candidates per wanted neighbour that Faiss returns for exact re-ranking (1: none), before
  /// target_recall raises it.
  virtual int64_t refine() const { return 1; }

  /// What a user can change when target_recall is out of reach of the index.
  virtual std::string reach_hint() const { return "use exact"; }

  /// The parameters of the built CPU `index` (or `refine`) that target_recall chooses for
  /// `top_k` over `ng` items, in the order they are raised (the next only when the previous falls
  /// short over its whole range); none where the args set them.
  virtual std::vector<Knob> knobs(faiss::Index& index, int64_t& refine, int64_t ng, int64_t top_k) const {
    (void)index;
    (void)refine;
    (void)ng;
    (void)top_k;
    return {};
  }

  /// Faiss's IVF settings that are ours: its seed, and our own training sample.
  void configure_ivf(faiss::IndexIVF& ivf, int64_t nprobe) const;

  int seed31() const { return static_cast<int>(seed_ & 0x7fffffff); }
  const std::string& backend_name() const { return name_; }
  const ChunkOptions& chunks() const { return chunks_; }

 private:
  std::unique_ptr<faiss::Index> build(PlannedIndex planned, const at::Tensor& g) const;

  // target_recall (TuneOptions; tuning.cpp): chooses the knobs on the CPU index before it moves
  // to a GPU, logs the choice and keeps the recall reached for tuned_recall().
  std::optional<RecallEstimate> tune(faiss::Index& index, int64_t& refine, const at::Tensor& g,
                                     const ItemSet& gallery, const KnnOptions& options) const;

  // The positions stored in IVF lists after `removed` left the gallery: each shifts down by the
  // number of removed positions below it.
  static void renumber(faiss::IndexIVF& ivf, const std::vector<int64_t>& removed);

  // k-means (and PQ codebooks) on a seeded sample of gallery rows, read in ascending order.
  void train(faiss::Index& index, const at::Tensor& g, int64_t train_size) const;

  void search_refined(const faiss::Index& index, const at::Tensor& q, const at::Tensor& g,
                      const IgnoredPairs& ignored, const KnnOptions& options, int64_t refine,
                      RetrievalResults& out) const;

  std::string name_;
  ChunkOptions chunks_;
  TuneOptions tune_;
  uint64_t seed_;
  int cuda_device_;
  mutable std::mutex tuned_mutex_;
  mutable std::optional<RecallEstimate> tuned_;
  // Made on the first copy to a GPU; stays null without GPU Faiss.
  mutable std::shared_ptr<faiss::gpu::StandardGpuResources> gpu_resources_;
};

}  // namespace oml::retrieval::detail
