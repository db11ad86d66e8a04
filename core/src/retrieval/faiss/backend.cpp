// FaissBackend (backend.h): building, loading, searching and changing the Faiss indexes of every
// kind; target_recall is in tuning.cpp.
#include "backend.h"

#include <faiss/IndexHNSW.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/index_io.h>
#include <faiss/invlists/InvertedLists.h>
#if OML_HAVE_FAISS_GPU
#include <faiss/gpu/GpuCloner.h>
#include <faiss/gpu/StandardGpuResources.h>
#endif

#include <chrono>
#include <new>
#include <random>
#include <stdexcept>

#include "../candidate_lists.h"
#include "gallery_index.h"
#include "integrity.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/random.h"

namespace oml::retrieval::detail {

faiss::MetricType metric_of(Measure measure) {
  return measure == Measure::negative_dot ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
}

Measure measure_of(const faiss::Index& index) {
  return index.metric_type == faiss::METRIC_INNER_PRODUCT ? Measure::negative_dot : Measure::euclidean;
}

const char* measure_name(Measure measure) {
  return measure == Measure::negative_dot ? "inner-product (distance: dot)" : "Euclidean";
}

faiss::IndexFlat* new_flat(FaissId dim, Measure measure) {
  if (measure == Measure::negative_dot) return new faiss::IndexFlatIP(dim);
  return new faiss::IndexFlatL2(dim);
}

std::vector<int64_t> sample_rows(int64_t ng, int64_t n, uint64_t seed, uint64_t purpose) {
  std::vector<int64_t> rows(static_cast<std::size_t>(ng));
  for (int64_t i = 0; i < ng; ++i) rows[i] = i;
  std::mt19937_64 rng(derive_seed(seed, {purpose}));
  n = std::min(n, ng);
  for (int64_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, ng - 1);
    std::swap(rows[i], rows[pick(rng)]);
  }
  rows.resize(static_cast<std::size_t>(n));
  std::sort(rows.begin(), rows.end());
  return rows;
}

namespace {

// Candidates are scattered over the gallery: each row is read with gather_rows, so a
// memory-mapped gallery does not become resident folio by folio (io/mapped_file.h).
double exact_key_at(Measure measure, const at::Tensor& q, int64_t qi, const at::Tensor& g, int64_t gi) {
  const int64_t dim = q.size(1);
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(dim));
  io::gather_rows(g, &gi, 1, row.data());
  return detail::exact_key(measure, q.data_ptr<float>() + qi * dim, row.data(), dim);
}

}  // namespace

FaissBackend::FaissBackend(std::string name, ChunkOptions chunks, TuneOptions tune, uint64_t seed,
                           int cuda_device)
    : name_(std::move(name)), chunks_(chunks), tune_(tune), seed_(seed), cuda_device_(cuda_device) {}

std::optional<RecallEstimate> FaissBackend::tuned_recall() const {
  const std::lock_guard<std::mutex> lock(tuned_mutex_);
  return tuned_;
}

RetrievalResults FaissBackend::search(const ItemSet& queries, const ItemSet& gallery,
                                      const KnnOptions& options) const {
  OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
  const auto start = std::chrono::steady_clock::now();
  const std::unique_ptr<GalleryIndex> index = build_index(gallery, options);
  const auto built = std::chrono::steady_clock::now();
  RetrievalResults out = index->search(queries, options);
  if (index->size() > 0) {
    log::info(::oml::detail::concat(
        name_, ": index built in ", std::chrono::duration<double>(built - start).count(), " s, ",
        queries.embeddings.size(0), " queries searched in ",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count(), " s"));
  }
  return out;
}

std::unique_ptr<GalleryIndex> FaissBackend::build_index(ItemSet gallery, const KnnOptions& options) const {
  OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
  const at::Tensor g = gallery.embeddings.contiguous();
  const int64_t ng = g.size(0);
  if (ng == 0)
    return std::make_unique<FaissGalleryIndex>(*this, std::move(gallery), nullptr, refine(), std::nullopt,
                                               options.measure);
  PlannedIndex planned = plan(ng, g.size(1), options.measure);
  log::info("k-NN with " + planned.description + " over " + std::to_string(ng) + " gallery items");
  try {
    std::unique_ptr<faiss::Index> index = build(std::move(planned), g);
    int64_t refine = this->refine();
    std::optional<RecallEstimate> tuned;
    if (tune_.on()) tuned = tune(*index, refine, g, gallery, options);
    return std::make_unique<FaissGalleryIndex>(*this, std::move(gallery), std::move(index), refine, tuned,
                                               options.measure);
  } catch (const faiss::FaissException& e) {
    throw RuntimeError("retrieval backend '" + name_ + "': Faiss failed: " + e.what());
  }
}

namespace {

// Faiss allocates ef_search slots per search; beyond the graph's size (or the default) it
// explores no more, so a larger value is taken as that.
int bounded_ef_search(const faiss::Index& index, int64_t value) {
  return static_cast<int>(std::min<int64_t>(value, std::max(index.ntotal, kDefaultEfSearch)));
}

}  // namespace

std::unique_ptr<GalleryIndex> FaissBackend::load_index(ItemSet gallery, const std::filesystem::path& file,
                                                       const std::map<std::string, int64_t>& parameters,
                                                       Measure measure) const {
  if (file.empty()) {
    // An index emptied by remove keeps no file (FaissGalleryIndex::write); its next add builds.
    OML_CHECK(!writes_index() || gallery.embeddings.size(0) == 0, DataError, "retrieval backend '", name_,
              "' keeps its index in a file of its own, and none was given");
    // faiss_flat: the embeddings are its index.
    KnnOptions options;
    options.measure = measure;
    return build_index(std::move(gallery), options);
  }
  std::unique_ptr<faiss::Index> index;
  try {
    index.reset(faiss::read_index(file.c_str()));
  } catch (const faiss::FaissException& e) {
    throw DataError(file.string() + ": not a Faiss index file Faiss can read (" + e.what() + ")");
  } catch (const std::bad_alloc&) {
    // Faiss sizes its arrays by the counts the file declares before reading them.
    throw DataError(file.string() + ": corrupt Faiss index: it declares arrays larger than memory");
  } catch (const std::length_error&) {
    throw DataError(file.string() + ": corrupt Faiss index: it declares arrays larger than memory");
  }
  const int64_t ng = gallery.embeddings.size(0);
  OML_CHECK(holds_kind(*index), DataError, file.string(), ": holds another kind of Faiss index than '", name_,
            "' builds");
  check_index_structure(*index, file.string());
  OML_CHECK(index->d == gallery.embeddings.size(1) && index->ntotal == ng, DataError, file.string(),
            ": holds ", index->ntotal, " vectors of dimension ", index->d, ", the gallery has ", ng, " of ",
            gallery.embeddings.size(1));
  OML_CHECK(measure_of(*index) == measure, DataError, file.string(), ": holds an index for ",
            measure_name(measure_of(*index)), " search, expected one for ", measure_name(measure),
            " search (the index folder's retrieval_backend.distance)");
  int64_t refine = this->refine();
  apply_parameters(*index, refine, parameters);
  if (auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(index.get())) {
    // The file's own ef_search where the manifest names none, bounded as apply_parameters bounds it.
    hnsw->hnsw.efSearch = bounded_ef_search(*index, hnsw->hnsw.efSearch);
  }
  return std::make_unique<FaissGalleryIndex>(*this, std::move(gallery), std::move(index), refine,
                                             std::nullopt, measure);
}

RetrievalResults FaissBackend::search_built(const faiss::Index& index, int64_t refine, const ItemSet& queries,
                                            const ItemSet& gallery, const KnnOptions& options,
                                            const detail::PreparedGallery* prepared,
                                            const SearchState* state) const {
  OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
  const at::Tensor q = queries.embeddings.contiguous();
  const at::Tensor g = gallery.embeddings.contiguous();
  const IgnoredPairs ignored(queries, gallery, prepared);
  RetrievalResults out = results_skeleton(queries, gallery, ignored, prepared);
  const int64_t nq = q.size(0);
  if (g.size(0) == 0) {
    out.offsets.assign(static_cast<std::size_t>(nq + 1), 0);
    return out;
  }
  OML_CHECK(g.size(1) == q.size(1), DataError, "queries have dimension ", q.size(1), " but the gallery has ",
            g.size(1));
  OML_ASSERT(measure_of(index) == options.measure, "an index for ", measure_name(measure_of(index)),
             " search searched for ", measure_name(options.measure), " search");
  try {
    if (options.on_progress) options.on_progress(0, nq);
    search_index(index, q, g, ignored, options, refine, state, out);
  } catch (const faiss::FaissException& e) {
    throw RuntimeError("retrieval backend '" + name_ + "': Faiss failed: " + e.what());
  }
  return out;
}

std::unique_ptr<faiss::Index> FaissBackend::without_rows(std::unique_ptr<faiss::Index> index,
                                                         const std::vector<int64_t>& removed,
                                                         const at::Tensor& g) const {
  (void)g;
  const faiss::IDSelectorBatch selector(removed.size(), removed.data());
  if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(index.get())) {
    ivf->remove_ids(selector);
    renumber(*ivf, removed);
  } else {
    index->remove_ids(selector);  // IndexFlat: positions shift as the gallery's rows
  }
  return index;
}

std::map<std::string, int64_t> FaissBackend::parameters(const faiss::Index& index, int64_t refine) const {
  (void)refine;
  std::map<std::string, int64_t> out;
  if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(&index)) {
    out["nprobe"] = static_cast<int64_t>(ivf->nprobe);
  }
  if (const auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(&index)) {
    out["ef_search"] = hnsw->hnsw.efSearch;
  }
  return out;
}

void FaissBackend::apply_parameters(faiss::Index& index, int64_t& refine,
                                    const std::map<std::string, int64_t>& values) const {
  for (const auto& [key, value] : values) {
    OML_CHECK(value >= 1, DataError, "search parameter ", key, " must be >= 1, got ", value);
    auto* ivf = dynamic_cast<faiss::IndexIVF*>(&index);
    auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(&index);
    if (key == "nprobe" && ivf != nullptr) {
      ivf->nprobe = static_cast<std::size_t>(std::min<int64_t>(value, static_cast<int64_t>(ivf->nlist)));
    } else if (key == "ef_search" && hnsw != nullptr) {
      hnsw->hnsw.efSearch = bounded_ef_search(index, value);
    } else if (key == "refine" && parameters(index, refine).count("refine") > 0) {
      refine = std::min(value, kMaxRefine);
    } else {
      throw DataError("search parameter '" + key + "' does not belong to a " + name_ + " index");
    }
  }
}

// Trained and filled on the CPU, then copied: Faiss's cloner copies every kind but HNSW. Written
// for CUDA builds of Faiss; untested (Debian's Faiss is CPU-only).
std::unique_ptr<faiss::Index> FaissBackend::copy_to_device(const faiss::Index& index) const {
  if (cuda_device_ < 0) return nullptr;
#if OML_HAVE_FAISS_GPU
  if (dynamic_cast<const faiss::IndexHNSW*>(&index) != nullptr) {
    log::info(name_ + ": Faiss has no GPU HNSW index; it searches on the CPU");
    return nullptr;
  }
  if (!gpu_resources_) gpu_resources_ = std::make_shared<faiss::gpu::StandardGpuResources>();
  std::unique_ptr<faiss::Index> on_gpu(
      faiss::gpu::index_cpu_to_gpu(gpu_resources_.get(), cuda_device_, &index));
  log::info(name_ + ": index copied to cuda:" + std::to_string(cuda_device_));
  return on_gpu;
#else
  (void)index;
  static std::once_flag said;
  std::call_once(said, [this] {
    log::info(name_ +
              ": searches on the CPU: this Faiss has no GPU support (Debian's libfaiss-dev is "
              "CPU-only; a Faiss built with CUDA puts the index on cuda:" +
              std::to_string(cuda_device_) + ")");
  });
  return nullptr;
#endif
}

void FaissBackend::configure_ivf(faiss::IndexIVF& ivf, int64_t nprobe) const {
  ivf.nprobe = static_cast<std::size_t>(nprobe);
  ivf.cp.seed = static_cast<int>(seed_ & 0x7fffffff);
  // The training sample is ours (train_size); Faiss must neither subsample it nor warn that
  // fewer than 39 points per list were given.
  ivf.cp.min_points_per_centroid = 1;
  ivf.cp.max_points_per_centroid = 1 << 30;
}

std::unique_ptr<faiss::Index> FaissBackend::build(PlannedIndex planned, const at::Tensor& g) const {
  faiss::Index& index = *planned.index;
  if (!index.is_trained) {
    const auto start = std::chrono::steady_clock::now();
    train(index, g, planned.train_size);
    log::info(::oml::detail::concat(
        name_, ": trained on ", planned.train_size, " vectors in ",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s"));
  }
  for_each_row_chunk(g, chunks_.add_chunk, [&](int64_t begin, int64_t end) {
    index.add(end - begin, g.data_ptr<float>() + begin * g.size(1));
  });
  return std::move(planned.index);
}

void FaissBackend::renumber(faiss::IndexIVF& ivf, const std::vector<int64_t>& removed) {
  // Built or read, an IVF index keeps its lists in memory (ArrayInvertedLists).
  auto* lists = dynamic_cast<faiss::ArrayInvertedLists*>(ivf.invlists);
  OML_ASSERT(lists != nullptr, "IVF lists are expected in memory");
  for (std::size_t list = 0; list < ivf.nlist; ++list) {
    for (FaissId& id : lists->ids[list]) {
      id -= static_cast<FaissId>(std::lower_bound(removed.begin(), removed.end(), id) - removed.begin());
    }
  }
}

void FaissBackend::train(faiss::Index& index, const at::Tensor& g, int64_t train_size) const {
  const int64_t dim = g.size(1);
  const std::vector<int64_t> rows = sample_rows(g.size(0), train_size, seed_, 0x74726169ULL);
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<float> sample(static_cast<std::size_t>(n * dim));
  io::gather_rows(g, rows.data(), rows.size(), sample.data());  // a mapped gallery stays unmapped
  index.train(n, sample.data());
}

void FaissBackend::search_refined(const faiss::Index& index, const at::Tensor& q, const at::Tensor& g,
                                  const IgnoredPairs& ignored, const KnnOptions& options, int64_t refine,
                                  RetrievalResults& out) const {
  const int64_t nq = q.size(0);
  const int64_t ng = g.size(0);
  const int64_t dim = q.size(1);
  std::vector<float> distances;
  std::vector<FaissId> labels;
  std::vector<std::pair<double, int64_t>> candidates;
  const int64_t need = candidates_needed(ignored, options.top_k, ng);
  for_each_row_chunk(q, chunks_.search_chunk, [&](int64_t q0, int64_t q1) {
    const int64_t k = std::min(ng, need * refine);
    distances.resize(static_cast<std::size_t>((q1 - q0) * k));
    labels.resize(distances.size());
    index.search(q1 - q0, q.data_ptr<float>() + q0 * dim, k, distances.data(), labels.data());
    // An inner-product index answers similarities s, largest first: the key is -s.
    if (options.measure == Measure::negative_dot) {
      for (float& s : distances) s = -s;
    }
    for (int64_t i = 0; i < q1 - q0; ++i) {
      const FaissId* row = labels.data() + i * k;
      if (refine == 1) {
        append_list(out, ignored, q0 + i, row, distances.data() + i * k, k, options.top_k, options.measure);
        continue;
      }
      // Approximate (or float32-cancelled) distances: re-rank the candidates exactly.
      candidates.clear();
      for (int64_t j = 0; j < k; ++j) {
        if (row[j] >= 0) candidates.emplace_back(exact_key_at(options.measure, q, q0 + i, g, row[j]), row[j]);
      }
      append_list(out, ignored, q0 + i, candidates, options.top_k, options.measure);
    }
    if (options.on_progress) options.on_progress(q1, nq);
  });
}

}  // namespace oml::retrieval::detail
