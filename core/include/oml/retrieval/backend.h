#pragma once
// Retrieval backends: who finds the top-k gallery items of every query
// (docs/metrics.md#retrieval-backends-retrieval_backend). A component kind with its own registry,
// `registries().retrieval_backends`:
//
//   retrieval_backend: {name: faiss_ivf, args: {nprobe: 32}, report_recall: 1000}
//
//   auto backend = registries().retrieval_backends.create(spec, {seed});
//   RetrievalResults top = backend->search(queries, gallery, knn_options);
//
// `exact` (the default) is retrieve_knn() of knn.h: the reference, and the only backend that
// serves metrics over all pairs (fnmr@fmr). The Faiss backends (`faiss_flat`, `faiss_ivf`,
// `faiss_hnsw`, `faiss_ivf_pq`) are approximate except faiss_flat; a build without Faiss still
// registers their names and fails with a ConfigError ("built without Faiss") when one is built.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::distributed {
class ProcessGroup;
}  // namespace oml::distributed

namespace oml::retrieval {

/// What a backend's build may use besides its args.
struct BackendContext {
  uint64_t seed = 42;  ///< seeds training samples (IVF) and level draws (HNSW): same data, same index
  /// The run's GPU (from `accelerator`), -1 = the CPU. With a GPU Faiss in the build
  /// (OML_HAVE_FAISS_GPU: a Faiss built with CUDA, not Debian's) the flat, IVF and IVF-PQ indexes
  /// are copied to this GPU once built and searched there — written for CUDA builds, untested.
  /// Without it the backends run on the CPU and log so once.
  int cuda_device = -1;
};

/// recall@k of an approximate retrieval, measured against the exact one.
struct RecallEstimate {
  int64_t k = 0;        ///< top_k of the retrieval compared
  int64_t queries = 0;  ///< queries sampled
  double recall = 1.0;  ///< mean over the sampled queries of |approx ∩ exact| / |exact|
};

/// Contract for every backend.
///
/// search() returns the same shape as retrieve_knn(): per query at most options.top_k gallery
/// positions, ascending by Euclidean distance ||q - g|| (by -q.g where options.measure is
/// negative_dot: an inner-product search, with -q.g as the distances), never an ignored pair (the query's own
/// dataset id, gallery items of the query's sequence), with n_gt, labels and ids filled exactly
/// (they do not depend on the search). An approximate backend may miss true neighbours (its
/// recall is measured by measure_recall) and may return fewer than top_k items for a query when
/// its index offers fewer candidates. A query's list must not depend on the other queries of the
/// call: under DDP each rank builds the backend's index over the whole gallery and searches only
/// its share of the queries (retrieve_sharded_by_queries, sharded_knn.h). (Faiss computes calls
/// of under 20 queries per thread with another distance kernel: docs/ddp.md says what that
/// changes.) The inputs are checked (validate_item_set) by the caller.
/// Errors a user can cause are ConfigError (bad args, or args that do not fit the data, such as
/// nlist > gallery size), thrown before any long work.
class GalleryIndex;

class RetrievalBackend {
 public:
  virtual ~RetrievalBackend() = default;
  virtual RetrievalResults search(const ItemSet& queries, const ItemSet& gallery,
                                  const KnnOptions& options) const = 0;
  /// Whether search() and build_index() honour `measure` (KnnOptions::measure). A plugin backend
  /// that only knows Euclidean distances keeps this default; a config asking it for `distance:
  /// dot` is then refused before any work (exact and the Faiss backends support both).
  virtual bool supports(Measure measure) const { return measure == Measure::euclidean; }
  /// True only for `exact`: results equal the double-precision ranking, and the blocked distance
  /// engine that also serves all-pairs metrics (fnmr@fmr) runs.
  virtual bool exact() const { return false; }
  /// Whether two builds of the index over the same gallery with the same seed, each by
  /// `num_threads` threads, are identical, so that ranks that each build one search the same index
  /// and the split search equals one process's. False for an index whose threads insert
  /// concurrently (faiss_hnsw with more than one thread).
  virtual bool deterministic_build(int num_threads) const {
    (void)num_threads;
    return true;
  }
  /// The recall its last search() reached where it chose its search parameters by measurement
  /// (the Faiss backends' `target_recall`: recall@top_k against the exact lists of a seeded
  /// sample of gallery items searched as queries); nullopt where it did not. A function of the
  /// gallery, the args and the seed, so the ranks that each search a share of the queries agree.
  virtual std::optional<RecallEstimate> tuned_recall() const { return std::nullopt; }
  /// An index over `gallery` to search many times (gallery_index.h), its search parameters
  /// chosen for options.top_k where target_recall chooses them. By default one that calls
  /// search() over the gallery each time (exact; plugins without an index of their own).
  virtual std::unique_ptr<GalleryIndex> build_index(ItemSet gallery, const KnnOptions& options) const;
  /// The index that GalleryIndex::write() wrote into `file` over this `gallery` (the same rows),
  /// searching with `parameters` (GalleryIndex::search_parameters()). `file` is empty where
  /// write() wrote nothing: then build_index() with the parameters as given. `measure`: what the
  /// index was built for (KnnOptions::measure at build_index; its searches pass the same).
  /// DataError when the file does not hold this kind's index of this gallery for this measure.
  virtual std::unique_ptr<GalleryIndex> load_index(ItemSet gallery, const std::filesystem::path& file,
                                                   const std::map<std::string, int64_t>& parameters,
                                                   Measure measure = Measure::euclidean) const;
  /// Registered name ("faiss_ivf").
  virtual std::string name() const = 0;
  /// The name with the effective parameters, for logs ("faiss_ivf nlist=4000 nprobe=32").
  virtual std::string describe() const { return name(); }
};

/// `exact`: retrieve_knn() (knn.h).
std::shared_ptr<RetrievalBackend> make_exact_backend();

/// Whether this oml-cpp was built with Faiss (the faiss_* backends work).
bool built_with_faiss();

/// Samples `sample` queries (all when fewer; seeded, without replacement), retrieves their exact
/// top-k (retrieve_knn, same options) and compares with `approximate` (the backend's results
/// for all of `queries`, before any postprocessor). Queries whose exact list is empty count as 1.
/// With a `group` of several ranks it is collective: every rank passes the same arguments, the
/// exact lists of the sample are split over the ranks by queries (retrieve_knn_sharded, equal to
/// one process's) and every rank returns the same estimate.
RecallEstimate measure_recall(const RetrievalResults& approximate, const ItemSet& queries,
                              const ItemSet& gallery, const KnnOptions& options, int64_t sample,
                              uint64_t seed, distributed::ProcessGroup* group = nullptr);

/// The key under which a recall estimate is reported with the metrics: "OVERALL/knn_recall/<k>".
std::string recall_metric_key(int64_t k);

/// Registers `exact` and the four Faiss backends.
void register_builtin_retrieval_backends(Registries& registries);

}  // namespace oml::retrieval
