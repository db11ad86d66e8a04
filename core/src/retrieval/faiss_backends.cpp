// The Faiss backends: faiss_flat, faiss_ivf, faiss_hnsw, faiss_ivf_pq
// (docs/metrics.md#retrieval-backends-retrieval_backend).
//
// Their args are read and checked the same way with or without Faiss in the build, so a config
// is judged alike everywhere; only building a backend needs Faiss (OML_HAVE_FAISS, set for this
// file alone by core/CMakeLists.txt). Distances are L2 like the exact backend's (cosine = L2 on
// normalised embeddings). The gallery is added in chunks and the queries searched in chunks, so
// a memory-mapped gallery is never copied whole (io/mapped_file.h releases what was read).
#include "faiss_backends.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "candidate_lists.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/random.h"
#include "oml/config/argument_error.h"
#include "oml/config/reader.h"
#include "oml/io/mapped_file.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/detail/inverted_list_scan.h"

#if OML_HAVE_FAISS
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/FaissException.h>
#include <faiss/invlists/InvertedLists.h>
#if OML_HAVE_FAISS_GPU
#include <faiss/gpu/GpuCloner.h>
#include <faiss/gpu/StandardGpuResources.h>
#endif
#endif

namespace oml::retrieval {

#if OML_HAVE_FAISS
bool built_with_faiss() { return true; }
#else
bool built_with_faiss() { return false; }
#endif

namespace detail {

namespace {

enum class IndexKind { flat, ivf, hnsw, ivf_pq };

// Every backend's args; each kind reads its own subset (0 = chosen from the data).
struct FaissOptions {
  IndexKind kind = IndexKind::flat;
  std::string name;
  int64_t nlist = 0;       // ivf, ivf_pq: 0 = 2 sqrt(G), at most G / 39 and 4096
  int64_t nprobe = 0;      // ivf, ivf_pq: 0 = nlist / 16 (1 to 16)
  int64_t train_size = 0;  // ivf, ivf_pq: 0 = min(G, 40 nlist), at least 2^nbits for PQ
  int64_t M = 32;          // hnsw: links per node
  int64_t ef_construction = 64;
  int64_t ef_search = 128;
  int64_t m = 0;          // ivf_pq: sub-quantizers, 0 = the largest divisor of D that is <= D / 4
  int64_t nbits = 8;      // ivf_pq: bits per sub-quantizer code
  int64_t refine = 4;     // ivf_pq: re-rank refine x k candidates by exact distances (1 = off)
  bool blas_scan = true;  // ivf: scan the probed lists with GEMM (inverted_list_scan.h), not Faiss's loop
  int64_t add_chunk = 65536;
  int64_t search_chunk = 65536;
};

constexpr int64_t kMaxHnswM = 256;
constexpr int64_t kMaxPqBits = 16;
constexpr int64_t kMaxRefine = 64;
constexpr int64_t kMaxAutoNlist = 4096;
constexpr int64_t kMaxAutoNprobe = 16;
constexpr int64_t kFlatRefine = 2;

// The parameters that depend on the gallery, resolved once per search.
struct Resolved {
  int64_t nlist = 0;
  int64_t nprobe = 0;
  int64_t train_size = 0;
  int64_t m = 0;
};

std::string arg_path(const std::string& key) { return "retrieval_backend.args." + key; }

// Unused (but still compiled) in a build without Faiss.
[[maybe_unused]] Resolved resolve(const FaissOptions& o, int64_t gallery_size, int64_t dim) {
  Resolved r;
  const int64_t g = gallery_size;
  const std::string who = "retrieval backend '" + o.name + "'";
  if (o.kind == IndexKind::ivf || o.kind == IndexKind::ivf_pq) {
    if (o.nlist > 0) {
      OML_CHECK(o.nlist <= g, ConfigError, arg_path("nlist"), ": ", who, ": nlist ", o.nlist,
                " is larger than the gallery (", g, " items); nlist must be at most the gallery size (",
                "default: 2 sqrt(G), at most G / 39 and 4096)");
      r.nlist = o.nlist;
    } else {
      // More lists make each probe cheaper but training (k-means: ~ nlist^2) and assigning every
      // item (a GEMM against all centroids) dearer. Faiss's usual 4 sqrt(G) suits its scan at
      // ~30 ns per vector; the BLAS scan (inverted_list_scan.h) makes scanning cheap enough that
      // fewer, longer lists pay (1M items: 2 sqrt(G) with nprobe 16 took 88 s, 4 sqrt(G) with
      // nprobe 64 took 184 s; docs/benchmarks.md). 4096 keeps assignment below the search up to
      // 10^7 items.
      const auto by_size = static_cast<int64_t>(std::llround(2.0 * std::sqrt(static_cast<double>(g))));
      r.nlist = std::max<int64_t>(1, std::min({by_size, g / 39, kMaxAutoNlist}));
    }
    // nlist / 16, at most 16: the scanned share of the gallery is 1/16 for small galleries and
    // falls as 8 / sqrt(G) beyond 16,384 items (2.5 % at 10^5, 0.8 % at 10^6), which keeps 10^6
    // items x 10^6 queries near 90 s on 2 cores; recall is measured per run (report_recall).
    r.nprobe =
        o.nprobe > 0 ? std::min(o.nprobe, r.nlist) : std::clamp<int64_t>(r.nlist / 16, 1, kMaxAutoNprobe);
    if (o.train_size > 0) {
      OML_CHECK(o.train_size >= r.nlist, ConfigError, arg_path("train_size"), ": ", who, ": train_size ",
                o.train_size, " is smaller than nlist ", r.nlist, " (k-means needs a point per list)");
      r.train_size = std::min(o.train_size, g);
    } else {
      // 40 points per list: just above Faiss's 39-point minimum; k-means cost grows with it.
      r.train_size = std::min(g, std::max<int64_t>(40 * r.nlist, 16384));
    }
  }
  if (o.kind == IndexKind::ivf_pq) {
    if (o.m > 0) {
      OML_CHECK(dim % o.m == 0, ConfigError, arg_path("m"), ": ", who, ": m ", o.m,
                " does not divide the embedding dimension ", dim, " (each sub-quantizer codes D / m values)");
      r.m = o.m;
    } else {
      r.m = 1;
      for (int64_t d = 1; d <= std::max<int64_t>(1, dim / 4); ++d) {
        if (dim % d == 0) r.m = d;
      }
    }
    const int64_t codebook = int64_t{1} << o.nbits;
    OML_CHECK(g >= codebook, ConfigError, arg_path("nbits"), ": ", who, ": nbits ", o.nbits,
              " needs at least ", codebook, " gallery items to train its codebooks, the gallery has ", g,
              "; lower nbits or use faiss_ivf / exact");
    r.train_size = std::max(r.train_size, std::min(g, codebook * 4));
  }
  return r;
}

[[maybe_unused]] std::string describe_options(const FaissOptions& o, const Resolved* r) {
  std::string out = o.name;
  // 0 before the gallery is known: chosen from the data.
  auto add = [&out](const char* key, int64_t value) {
    out += " " + std::string(key) + "=" + (value == 0 ? std::string("auto") : std::to_string(value));
  };
  switch (o.kind) {
    case IndexKind::flat:
      break;
    case IndexKind::hnsw:
      add("M", o.M);
      add("ef_construction", o.ef_construction);
      add("ef_search", o.ef_search);
      break;
    case IndexKind::ivf:
    case IndexKind::ivf_pq:
      add("nlist", r ? r->nlist : o.nlist);
      add("nprobe", r ? r->nprobe : o.nprobe);
      add("train_size", r ? r->train_size : o.train_size);
      if (o.kind == IndexKind::ivf) out += o.blas_scan ? " scan=blas" : " scan=faiss";
      if (o.kind == IndexKind::ivf_pq) {
        add("m", r ? r->m : o.m);
        add("nbits", o.nbits);
        add("refine", o.refine);
      }
      break;
  }
  return out;
}

#if OML_HAVE_FAISS

// faiss::idx_t is Faiss 1.7.4's spelling; Debian 12 ships 1.7.3.
using FaissId = faiss::Index::idx_t;
static_assert(sizeof(FaissId) == sizeof(int64_t), "Faiss ids are gallery positions (int64)");

// Rows [begin, end) of a [N, D] float32 contiguous tensor, then released if memory-mapped.
template <class Fn>
void for_each_row_chunk(const at::Tensor& rows, int64_t chunk, Fn&& fn) {
  const int64_t n = rows.size(0);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    fn(begin, end);
    io::release_mapped_rows(rows, begin, end);
  }
}

class FaissBackend final : public RetrievalBackend {
 public:
  FaissBackend(FaissOptions options, uint64_t seed, int cuda_device)
      : options_(std::move(options)), seed_(seed), cuda_device_(cuda_device) {}

  std::string name() const override { return options_.name; }
  std::string describe() const override { return describe_options(options_, nullptr); }
  // Measured (docs/ddp.md): flat, IVF and IVF-PQ indexes are identical byte for byte whatever the
  // threads; HNSW threads insert nodes concurrently, so its graph depends on their timing.
  bool deterministic_build(int num_threads) const override {
    return options_.kind != IndexKind::hnsw || num_threads <= 1;
  }

  RetrievalResults search(const ItemSet& queries, const ItemSet& gallery,
                          const KnnOptions& options) const override {
    OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
    const at::Tensor q = queries.embeddings.contiguous();
    const at::Tensor g = gallery.embeddings.contiguous();
    OML_CHECK(g.size(1) == q.size(1), DataError, "queries have dimension ", q.size(1),
              " but the gallery has ", g.size(1));
    const IgnoredPairs ignored(queries, gallery);
    RetrievalResults out = results_skeleton(queries, gallery, ignored);
    const int64_t nq = q.size(0);
    const int64_t ng = g.size(0);
    if (ng == 0) {
      out.offsets.assign(static_cast<std::size_t>(nq + 1), 0);
      return out;
    }
    const Resolved resolved = resolve(options_, ng, g.size(1));
    log::info("k-NN with " + describe_options(options_, &resolved) + " over " + std::to_string(ng) +
              " gallery items");
    try {
      const auto start = std::chrono::steady_clock::now();
      const std::unique_ptr<faiss::Index> index = build_index(g, resolved);
      const auto built = std::chrono::steady_clock::now();
      search_all(*index, q, g, ignored, options, resolved, out);
      const auto searched = std::chrono::steady_clock::now();
      log::info(::oml::detail::concat(
          options_.name, ": index built in ", std::chrono::duration<double>(built - start).count(), " s, ",
          nq, " queries searched in ", std::chrono::duration<double>(searched - built).count(), " s"));
    } catch (const faiss::FaissException& e) {
      throw RuntimeError("retrieval backend '" + options_.name + "': Faiss failed: " + e.what());
    }
    return out;
  }

 private:
  std::unique_ptr<faiss::Index> build_index(const at::Tensor& g, const Resolved& r) const {
    const auto dim = static_cast<FaissId>(g.size(1));
    std::unique_ptr<faiss::Index> index;
    switch (options_.kind) {
      case IndexKind::flat:
        index = std::make_unique<faiss::IndexFlatL2>(dim);
        break;
      case IndexKind::hnsw: {
        auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(dim, static_cast<int>(options_.M));
        hnsw->hnsw.efConstruction = static_cast<int>(options_.ef_construction);
        hnsw->hnsw.efSearch = static_cast<int>(options_.ef_search);
        index = std::move(hnsw);
        break;
      }
      case IndexKind::ivf: {
        auto ivf = std::make_unique<faiss::IndexIVFFlat>(new faiss::IndexFlatL2(dim), dim, r.nlist);
        ivf->own_fields = true;
        configure_ivf(*ivf, r);
        index = std::move(ivf);
        break;
      }
      case IndexKind::ivf_pq: {
        auto pq = std::make_unique<faiss::IndexIVFPQ>(new faiss::IndexFlatL2(dim), dim, r.nlist, r.m,
                                                      options_.nbits);
        pq->own_fields = true;
        configure_ivf(*pq, r);
        pq->pq.cp.seed = static_cast<int>(seed_ & 0x7fffffff);
        // The gallery-size check (2^nbits items) is ours; no warning per sub-quantizer.
        pq->pq.cp.min_points_per_centroid = 1;
        index = std::move(pq);
        break;
      }
    }
    if (!index->is_trained) {
      const auto start = std::chrono::steady_clock::now();
      train(*index, g, r);
      log::info(::oml::detail::concat(
          options_.name, ": trained on ", r.train_size, " vectors in ",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s"));
    }
    for_each_row_chunk(g, options_.add_chunk, [&](int64_t begin, int64_t end) {
      index->add(end - begin, g.data_ptr<float>() + begin * g.size(1));
    });
    return place_on_device(std::move(index));
  }

  // The built index on the run's GPU where the build has GPU Faiss (trained and filled on the
  // CPU, then copied: Faiss's cloner copies every kind but HNSW). Written for CUDA builds of
  // Faiss; untested (Debian's Faiss is CPU-only).
  std::unique_ptr<faiss::Index> place_on_device(std::unique_ptr<faiss::Index> index) const {
    if (cuda_device_ < 0) return index;
#if OML_HAVE_FAISS_GPU
    if (options_.kind == IndexKind::hnsw) {
      log::info(options_.name + ": Faiss has no GPU HNSW index; it searches on the CPU");
      return index;
    }
    if (!gpu_resources_) gpu_resources_ = std::make_shared<faiss::gpu::StandardGpuResources>();
    std::unique_ptr<faiss::Index> on_gpu(
        faiss::gpu::index_cpu_to_gpu(gpu_resources_.get(), cuda_device_, index.get()));
    log::info(options_.name + ": index copied to cuda:" + std::to_string(cuda_device_));
    return on_gpu;
#else
    static std::once_flag said;
    std::call_once(said, [this] {
      log::info(options_.name +
                ": searches on the CPU: this Faiss has no GPU support (Debian's libfaiss-dev is "
                "CPU-only; a Faiss built with CUDA puts the index on cuda:" +
                std::to_string(cuda_device_) + ")");
    });
    return index;
#endif
  }

  void configure_ivf(faiss::IndexIVF& ivf, const Resolved& r) const {
    ivf.nprobe = static_cast<std::size_t>(r.nprobe);
    ivf.cp.seed = static_cast<int>(seed_ & 0x7fffffff);
    // The training sample is ours (train_size); Faiss must neither subsample it nor warn that
    // fewer than 39 points per list were given.
    ivf.cp.min_points_per_centroid = 1;
    ivf.cp.max_points_per_centroid = 1 << 30;
  }

  // k-means (and PQ codebooks) on a seeded sample of gallery rows, read in ascending order.
  void train(faiss::Index& index, const at::Tensor& g, const Resolved& r) const {
    const int64_t ng = g.size(0);
    const int64_t dim = g.size(1);
    std::vector<int64_t> rows(static_cast<std::size_t>(ng));
    for (int64_t i = 0; i < ng; ++i) rows[i] = i;
    std::mt19937_64 rng(derive_seed(seed_, {0x74726169ULL}));
    const int64_t n = std::min(r.train_size, ng);
    for (int64_t i = 0; i < n; ++i) {
      std::uniform_int_distribution<int64_t> pick(i, ng - 1);
      std::swap(rows[i], rows[pick(rng)]);
    }
    rows.resize(static_cast<std::size_t>(n));
    std::sort(rows.begin(), rows.end());
    std::vector<float> sample(static_cast<std::size_t>(n * dim));
    io::gather_rows(g, rows.data(), rows.size(), sample.data());  // a mapped gallery stays unmapped
    index.train(n, sample.data());
  }

  void search_all(const faiss::Index& index, const at::Tensor& q, const at::Tensor& g,
                  const IgnoredPairs& ignored, const KnnOptions& options, const Resolved& r,
                  RetrievalResults& out) const {
    const int64_t nq = q.size(0);
    const int64_t ng = g.size(0);
    const int64_t dim = q.size(1);
    // faiss_flat ranks in float32, where ||q||^2 + ||g||^2 - 2 q.g cancels for close neighbours
    // and swaps near-ties; re-ranking its 2 k best by exact distances gives exact's lists, which is
    // what a cross-check of `exact` is for.
    const int64_t refine = options_.kind == IndexKind::ivf_pq ? options_.refine
                           : options_.kind == IndexKind::flat ? kFlatRefine
                                                              : 1;
    if (options.on_progress) options.on_progress(0, nq);
    // The blocked scan reads the CPU index's lists; an index on a GPU searches there.
    const auto* cpu_ivf = dynamic_cast<const faiss::IndexIVF*>(&index);
    if (options_.kind == IndexKind::ivf && options_.blas_scan && cpu_ivf != nullptr) {
      scan_ivf_flat(*cpu_ivf, q, ignored, options, r, out);
      return;
    }
    std::vector<float> distances;
    std::vector<FaissId> labels;
    std::vector<std::pair<double, int64_t>> candidates;
    const int64_t need = candidates_needed(ignored, options.top_k, ng);
    for_each_row_chunk(q, options_.search_chunk, [&](int64_t q0, int64_t q1) {
      const int64_t k = std::min(ng, need * refine);
      distances.resize(static_cast<std::size_t>((q1 - q0) * k));
      labels.resize(distances.size());
      index.search(q1 - q0, q.data_ptr<float>() + q0 * dim, k, distances.data(), labels.data());
      for (int64_t i = 0; i < q1 - q0; ++i) {
        const FaissId* row = labels.data() + i * k;
        if (refine == 1) {
          append_list(out, ignored, q0 + i, row, distances.data() + i * k, k, options.top_k);
          continue;
        }
        // PQ distances are approximate: re-rank the candidates by exact distances.
        candidates.clear();
        for (int64_t j = 0; j < k; ++j) {
          if (row[j] >= 0) candidates.emplace_back(exact_squared_distance(q, q0 + i, g, row[j]), row[j]);
        }
        append_list(out, ignored, q0 + i, candidates, options.top_k);
      }
      if (options.on_progress) options.on_progress(q1, nq);
    });
    (void)r;
  }

  // IVF-Flat with the probed lists scanned by InvertedListScanner: Faiss's coarse quantizer picks
  // the lists (as in its own search), the vectors are read from Faiss's inverted lists in place.
  void scan_ivf_flat(const faiss::IndexIVF& ivf, const at::Tensor& q, const IgnoredPairs& ignored,
                     const KnnOptions& options, const Resolved& r, RetrievalResults& out) const {
    static_assert(std::is_same_v<FaissId, int64_t>, "Faiss ids are read as gallery positions");
    const int64_t dim = q.size(1);
    const int64_t nq = q.size(0);
    std::vector<InvertedList> lists(ivf.nlist);
    for (std::size_t l = 0; l < ivf.nlist; ++l) {
      // IVF-Flat stores each item's float vector as its code.
      lists[l] = {static_cast<int64_t>(ivf.invlists->list_size(l)),
                  reinterpret_cast<const float*>(ivf.invlists->get_codes(l)), ivf.invlists->get_ids(l)};
    }
    const InvertedListScanner scanner(std::move(lists), dim);
    const int64_t nprobe = r.nprobe;
    std::vector<float> coarse_distances;
    std::vector<FaissId> probes;
    const int64_t chunk = InvertedListScanner::chunk_rows(options_.search_chunk, options.top_k);
    for_each_row_chunk(q, chunk, [&](int64_t q0, int64_t q1) {
      const float* rows = q.data_ptr<float>() + q0 * dim;
      coarse_distances.resize(static_cast<std::size_t>((q1 - q0) * nprobe));
      probes.resize(coarse_distances.size());
      ivf.quantizer->search(q1 - q0, rows, nprobe, coarse_distances.data(), probes.data());
      scanner.scan(rows, q1 - q0, q0, probes.data(), nprobe, ignored, options.top_k, out);
      if (options.on_progress) options.on_progress(q1, nq);
    });
  }

  // Candidates are scattered over the gallery: each row is read with gather_rows, so a
  // memory-mapped gallery does not become resident folio by folio (io/mapped_file.h).
  static double exact_squared_distance(const at::Tensor& q, int64_t qi, const at::Tensor& g, int64_t gi) {
    const int64_t dim = q.size(1);
    thread_local std::vector<float> row;
    row.resize(static_cast<std::size_t>(dim));
    io::gather_rows(g, &gi, 1, row.data());
    return detail::exact_squared_distance(q.data_ptr<float>() + qi * dim, row.data(), dim);
  }

  FaissOptions options_;
  uint64_t seed_;
  int cuda_device_;
#if OML_HAVE_FAISS_GPU
  mutable std::shared_ptr<faiss::gpu::StandardGpuResources> gpu_resources_;
#endif
};

#endif  // OML_HAVE_FAISS

std::shared_ptr<RetrievalBackend> make_faiss_backend(const FaissOptions& options,
                                                     const BackendContext& context) {
#if OML_HAVE_FAISS
  return std::make_shared<FaissBackend>(options, context.seed, context.cuda_device);
#else
  (void)context;
  throw ConfigError("retrieval backend '" + options.name +
                    "': this oml-cpp was built without Faiss; install libfaiss-dev (scripts/setup.sh) and "
                    "rebuild, or use retrieval_backend: {name: exact}");
#endif
}

// Reads the args of `kind` into `options`, checking what needs no data.
void read_args(config::MapReader& reader, FaissOptions& o) {
  const std::string who = "retrieval backend '" + o.name + "'";
  reader.optional("add_chunk", o.add_chunk).optional("search_chunk", o.search_chunk);
  if (o.kind == IndexKind::ivf || o.kind == IndexKind::ivf_pq) {
    reader.optional("nlist", o.nlist).optional("nprobe", o.nprobe).optional("train_size", o.train_size);
  }
  std::string scan = "blas";
  if (o.kind == IndexKind::ivf) reader.optional("scan", scan);
  if (o.kind == IndexKind::hnsw) {
    reader.optional("M", o.M)
        .optional("ef_construction", o.ef_construction)
        .optional("ef_search", o.ef_search);
  }
  if (o.kind == IndexKind::ivf_pq) {
    reader.optional("m", o.m).optional("nbits", o.nbits).optional("refine", o.refine);
  }
  reader.finish();
  config::check_argument(
      scan == "blas" || scan == "faiss", who, "scan",
      "scan must be 'blas' (the probed lists multiplied as blocks) or 'faiss' (Faiss's own "
      "vector-by-vector scan), got '",
      scan, "'");
  o.blas_scan = scan == "blas";
  config::check_argument(o.add_chunk >= 1, who, "add_chunk", "add_chunk must be >= 1, got ", o.add_chunk);
  config::check_argument(o.search_chunk >= 1, who, "search_chunk", "search_chunk must be >= 1, got ",
                         o.search_chunk);
  config::check_argument(o.nlist >= 0, who, "nlist", "nlist must be >= 1 (or 0: from the gallery size), got ",
                         o.nlist);
  config::check_argument(o.nprobe >= 0, who, "nprobe",
                         "nprobe must be >= 1 (or 0: nlist / 16, at most 16), got ", o.nprobe);
  config::check_argument(o.nlist == 0 || o.nprobe <= o.nlist, who, "nprobe", "nprobe ", o.nprobe,
                         " is larger than nlist ", o.nlist, " (at most every list can be probed)");
  config::check_argument(o.train_size >= 0, who, "train_size",
                         "train_size must be >= nlist (or 0: from the gallery size), got ", o.train_size);
  config::check_argument(o.M >= 2 && o.M <= kMaxHnswM, who, "M", "M must be in [2, ", kMaxHnswM, "], got ",
                         o.M);
  config::check_argument(o.ef_construction >= 1, who, "ef_construction", "ef_construction must be >= 1, got ",
                         o.ef_construction);
  config::check_argument(o.ef_search >= 1, who, "ef_search", "ef_search must be >= 1, got ", o.ef_search);
  config::check_argument(o.m >= 0, who, "m", "m must be >= 1 (or 0: D / 4), got ", o.m);
  config::check_argument(o.nbits >= 1 && o.nbits <= kMaxPqBits, who, "nbits", "nbits must be in [1, ",
                         kMaxPqBits, "], got ", o.nbits);
  config::check_argument(o.refine >= 1 && o.refine <= kMaxRefine, who, "refine", "refine must be in [1, ",
                         kMaxRefine, "] (1: no re-ranking), got ", o.refine);
}

}  // namespace

void register_faiss_backends(Registries& registries) {
  struct Entry {
    const char* name;
    IndexKind kind;
    const char* help;
  };
  const Entry entries[] = {
      {"faiss_flat", IndexKind::flat,
       "exhaustive Faiss IndexFlatL2 in float32, its 2 k best re-ranked by exact distances (a cross-check of "
       "exact); add_chunk, search_chunk"},
      {"faiss_ivf", IndexKind::ivf,
       "IVF-Flat: nlist = 2 sqrt(G) (at most G / 39 and 4096), nprobe = nlist / 16 (at most 16), train_size "
       "= 40 nlist, scan = blas (probed lists as GEMM blocks; faiss: Faiss's own scan); approximate"},
      {"faiss_hnsw", IndexKind::hnsw,
       "HNSW graph: M = 32, ef_construction = 64, ef_search = 128; approximate"},
      {"faiss_ivf_pq", IndexKind::ivf_pq,
       "IVF with product quantisation: nlist, nprobe as faiss_ivf, m = D / 4, nbits = 8, refine = 4 "
       "(re-rank refine x k candidates exactly); approximate, small index"},
  };
  for (const Entry& entry : entries) {
    const std::string name = entry.name;
    const IndexKind kind = entry.kind;
    registries.retrieval_backends.add(
        name,
        [name, kind](const config::Node& args,
                     const BackendContext& context) -> std::shared_ptr<RetrievalBackend> {
          FaissOptions options;
          options.kind = kind;
          options.name = name;
          config::MapReader reader(args, "retrieval backend '" + name + "' args");
          read_args(reader, options);
          return make_faiss_backend(options, context);
        },
        entry.help);
  }
}

}  // namespace detail

}  // namespace oml::retrieval
