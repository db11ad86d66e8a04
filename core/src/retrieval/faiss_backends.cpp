// The Faiss backends: faiss_flat, faiss_ivf, faiss_hnsw, faiss_ivf_pq
// (docs/metrics.md#retrieval-backends-retrieval_backend), one type per index kind, each with
// its own options struct (its args and their defaults, stated once) and a shared FaissBackend
// that adds, trains, searches and re-ranks.
//
// Their args are read and checked the same way with or without Faiss in the build, so a config
// is judged alike everywhere (then, without Faiss, the parse says so); only building a backend
// needs Faiss (OML_HAVE_FAISS, set for this file alone by core/CMakeLists.txt). Distances are L2 like the
// exact backend's (cosine = L2 on normalised embeddings), or, under Measure::negative_dot (`distance: dot`),
// each kind's inner-product index (METRIC_INNER_PRODUCT) whose similarities s are reported as -s. The gallery
// is added in chunks and the queries searched in chunks, so a memory-mapped gallery is never copied whole
// (io/mapped_file.h releases what was read).
#include "faiss_backends.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
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
#include "oml/retrieval/gallery_index.h"

#ifndef OML_HAVE_FAISS
#define OML_HAVE_FAISS 0
#endif

#if OML_HAVE_FAISS
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/index_io.h>
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

constexpr int64_t kMaxHnswM = 256;
constexpr int64_t kMaxPqBits = 16;
constexpr int64_t kMaxRefine = 64;
constexpr int64_t kDefaultRefine = 4;      // faiss_ivf_pq's refine when target_recall is off
constexpr int64_t kDefaultEfSearch = 128;  // faiss_hnsw's ef_search when target_recall is off
constexpr int64_t kMaxAutoNlist = 4096;
constexpr int64_t kMaxAutoNprobe = 16;
constexpr int64_t kFlatRefine = 2;

[[maybe_unused]] std::string arg_path(const std::string& key) { return "retrieval_backend.args." + key; }

// ---- Each kind's options: its args, their defaults, what needs no data to check ------------

// Every Faiss backend's chunking: the gallery is added and the queries searched this many rows
// at a time, so a memory-mapped gallery is never copied whole.
//
// Each kind's read() takes its keys, then finish() (unknown keys), then checks the values, so
// that a config's unknown keys are reported before its values are judged (a value check after
// a bad key is not reported: config/args_reader.h).
struct ChunkOptions {
  int64_t add_chunk = 65536;
  int64_t search_chunk = 65536;

  void read(config::MapReader& reader) {
    reader.optional("add_chunk", add_chunk).optional("search_chunk", search_chunk);
  }
  void check(const std::string& who) const {
    config::check_argument(add_chunk >= 1, who, "add_chunk", "add_chunk must be >= 1, got ", add_chunk);
    config::check_argument(search_chunk >= 1, who, "search_chunk", "search_chunk must be >= 1, got ",
                           search_chunk);
  }
};

// target_recall: a search parameter left at 0 (IVF's nprobe, HNSW's ef_search, IVF-PQ's refine)
// is chosen for each gallery as the smallest value, from the fixed default up, that reaches
// recall@k >= target_recall against the exact k-NN, measured on `tune_queries` gallery items (a
// seeded sample) searched as queries, each ignoring itself. Never below the fixed defaults: an
// average recall hides queries that lose everything (an HNSW search stuck in another cluster
// misses all its neighbours), and the defaults keep those rare — measured, docs/benchmarks.md.
// A function of the gallery, the args and the seed, never of the queries, so ranks that search
// shares of the queries choose alike. 0 = off: the fixed defaults of the help texts.
struct TuneOptions {
  double target_recall = 0.95;
  int64_t tune_queries = 1000;

  void read(config::MapReader& reader) {
    reader.optional("target_recall", target_recall).optional("tune_queries", tune_queries);
  }
  void check(const std::string& who) const {
    config::check_argument(target_recall >= 0.0 && target_recall <= 1.0, who, "target_recall",
                           "target_recall must be in (0, 1] (or 0: the fixed defaults), got ", target_recall);
    config::check_argument(tune_queries >= 1, who, "tune_queries", "tune_queries must be >= 1, got ",
                           tune_queries);
  }
  bool on() const { return target_recall > 0.0; }
};

// faiss_flat: exhaustive IndexFlatL2 (IndexFlatIP for dot).
struct FlatOptions {
  static constexpr const char* kHelp =
      "exhaustive Faiss IndexFlatL2 (IndexFlatIP for distance: dot) in float32, its 2 k best re-ranked by "
      "exact distances (a cross-check of "
      "exact); add_chunk, search_chunk";
  ChunkOptions chunks;

  void read(config::MapReader& reader, const std::string& who) {
    chunks.read(reader);
    reader.finish();
    chunks.check(who);
  }
};

// faiss_ivf: IVF-Flat (0 = chosen from the gallery size, see resolve_ivf).
struct IvfOptions {
  static constexpr const char* kHelp =
      "IVF-Flat: nlist = 2 sqrt(G) (at most G / 39 and 4096), nprobe chosen to reach target_recall = 0.95 "
      "(recall@k on tune_queries = 1000 gallery items; target_recall 0: nlist / 16, at most 16), train_size "
      "= 40 nlist, scan = blas (probed lists as GEMM blocks; faiss: Faiss's own scan); approximate";
  ChunkOptions chunks;
  TuneOptions tune;
  int64_t nlist = 0;
  int64_t nprobe = 0;
  int64_t train_size = 0;
  bool blas_scan = true;  // scan the probed lists with GEMM (inverted_list_scan.h), not Faiss's loop

  // The IVF keys, shared with IVF-PQ (which has no `scan`).
  void read_lists(config::MapReader& reader) {
    chunks.read(reader);
    tune.read(reader);
    reader.optional("nlist", nlist).optional("nprobe", nprobe).optional("train_size", train_size);
  }
  void check_lists(const std::string& who) const {
    chunks.check(who);
    tune.check(who);
    config::check_argument(nlist >= 0, who, "nlist", "nlist must be >= 1 (or 0: from the gallery size), got ",
                           nlist);
    config::check_argument(nprobe >= 0, who, "nprobe",
                           "nprobe must be >= 1 (or 0: chosen by target_recall), got ", nprobe);
    config::check_argument(nlist == 0 || nprobe <= nlist, who, "nprobe", "nprobe ", nprobe,
                           " is larger than nlist ", nlist, " (at most every list can be probed)");
    config::check_argument(train_size >= 0, who, "train_size",
                           "train_size must be >= nlist (or 0: from the gallery size), got ", train_size);
  }

  void read(config::MapReader& reader, const std::string& who) {
    std::string scan = "blas";
    read_lists(reader);
    reader.optional("scan", scan);
    reader.finish();
    check_lists(who);
    config::check_argument(
        scan == "blas" || scan == "faiss", who, "scan",
        "scan must be 'blas' (the probed lists multiplied as blocks) or 'faiss' (Faiss's own "
        "vector-by-vector scan), got '",
        scan, "'");
    blas_scan = scan == "blas";
  }
};

// faiss_hnsw: an HNSW graph.
struct HnswOptions {
  static constexpr const char* kHelp =
      "HNSW graph: M = 32, ef_construction = 64, ef_search chosen to reach target_recall = 0.95 (as "
      "faiss_ivf; target_recall 0: 128); approximate";
  ChunkOptions chunks;
  TuneOptions tune;
  int64_t M = 32;  // links per node
  int64_t ef_construction = 64;
  int64_t ef_search = 0;  // 0 = chosen by target_recall (128 without)

  void read(config::MapReader& reader, const std::string& who) {
    chunks.read(reader);
    tune.read(reader);
    reader.optional("M", M).optional("ef_construction", ef_construction).optional("ef_search", ef_search);
    reader.finish();
    chunks.check(who);
    tune.check(who);
    config::check_argument(M >= 2 && M <= kMaxHnswM, who, "M", "M must be in [2, ", kMaxHnswM, "], got ", M);
    config::check_argument(ef_construction >= 1, who, "ef_construction", "ef_construction must be >= 1, got ",
                           ef_construction);
    config::check_argument(ef_search >= 0, who, "ef_search",
                           "ef_search must be >= 1 (or 0: chosen by target_recall), got ", ef_search);
  }
};

// faiss_ivf_pq: IVF with product quantisation.
struct IvfPqOptions {
  static constexpr const char* kHelp =
      "IVF with product quantisation: nlist, nprobe, target_recall as faiss_ivf, m = D / 4, nbits = 8, "
      "refine = 4 (re-rank refine x k candidates exactly; raised by target_recall when every list probed "
      "falls short); approximate, small index";
  IvfOptions ivf;
  int64_t m = 0;      // sub-quantizers, 0 = the largest divisor of D that is <= D / 4
  int64_t nbits = 8;  // bits per sub-quantizer code
  int64_t refine =
      0;  // re-rank refine x k candidates by exact distances (1 = off; 0 = 4, raised by target_recall)

  void read(config::MapReader& reader, const std::string& who) {
    ivf.read_lists(reader);
    reader.optional("m", m).optional("nbits", nbits).optional("refine", refine);
    reader.finish();
    ivf.check_lists(who);
    config::check_argument(m >= 0, who, "m", "m must be >= 1 (or 0: D / 4), got ", m);
    config::check_argument(nbits >= 1 && nbits <= kMaxPqBits, who, "nbits", "nbits must be in [1, ",
                           kMaxPqBits, "], got ", nbits);
    config::check_argument(refine >= 0 && refine <= kMaxRefine, who, "refine", "refine must be in [1, ",
                           kMaxRefine, "] (1: no re-ranking; 0: 4, raised by target_recall), got ", refine);
  }
};

// ---- Parameters that depend on the gallery, resolved once per search ------------------------

// " key=value", or "=auto" for 0 (chosen from the data, before the gallery is known).
[[maybe_unused]] std::string param(const char* key, int64_t value) {
  std::string out(" ");
  out.append(key).append("=").append(value == 0 ? std::string("auto") : std::to_string(value));
  return out;
}

// " target_recall=0.95" where a parameter is left to it, else "".
[[maybe_unused]] std::string tune_text(const TuneOptions& tune, bool chosen_by_it) {
  if (!tune.on() || !chosen_by_it) return "";
  return " target_recall=" + ::oml::detail::concat(tune.target_recall);
}

struct IvfLists {
  int64_t nlist = 0;
  int64_t nprobe = 0;  // as given (0: auto), or as resolved: where target_recall starts from
  int64_t train_size = 0;
  bool nprobe_tuned = false;  // target_recall chooses nprobe

  std::string describe() const {
    return param("nlist", nlist) +
           (nprobe_tuned ? std::string(" nprobe=by target_recall") : param("nprobe", nprobe)) +
           param("train_size", train_size);
  }
};

[[maybe_unused]] bool tunes_nprobe(const IvfOptions& o) { return o.nprobe == 0 && o.tune.on(); }

// nlist / 16, at most 16: nprobe without target_recall, and where target_recall starts.
[[maybe_unused]] int64_t fixed_default_nprobe(int64_t nlist) {
  return std::clamp<int64_t>(nlist / 16, 1, kMaxAutoNprobe);
}

// Unused (but still compiled) in a build without Faiss.
[[maybe_unused]] IvfLists resolve_ivf(const IvfOptions& o, const std::string& who, int64_t g) {
  IvfLists r;
  if (o.nlist > 0) {
    if (o.nlist > g) {
      throw SettingError(arg_path("nlist"),
                         ::oml::detail::concat(who, ": nlist ", o.nlist, " is larger than the gallery (", g,
                                               " items); nlist must be at most the gallery size (default: 2 "
                                               "sqrt(G), at most G / 39 and 4096)"));
    }
    r.nlist = o.nlist;
  } else {
    // More lists make each probe cheaper but training (k-means: ~ nlist^2) and assigning every
    // item (a GEMM against all centroids) dearer. Faiss's usual 4 sqrt(G) suits its scan at
    // ~30 ns per vector; the BLAS scan (inverted_list_scan.h) makes scanning cheap enough that
    // fewer, longer lists pay (docs/benchmarks.md). 4096 keeps assignment below the search up
    // to 10^7 items.
    const auto by_size = static_cast<int64_t>(std::llround(2.0 * std::sqrt(static_cast<double>(g))));
    r.nlist = std::max<int64_t>(1, std::min({by_size, g / 39, kMaxAutoNlist}));
  }
  // Without target_recall: nlist / 16, at most 16 — the scanned share of the gallery is 1/16 for
  // small galleries and falls as 8 / sqrt(G) beyond 16,384 items (2.5 % at 10^5, 0.8 % at 10^6),
  // a time budget whose recall depends on the data. With it (the default) this is only where the
  // choice starts from (FaissBackend::tune).
  r.nprobe = o.nprobe > 0 ? std::min(o.nprobe, r.nlist) : fixed_default_nprobe(r.nlist);
  r.nprobe_tuned = tunes_nprobe(o);
  if (o.train_size > 0) {
    if (o.train_size < r.nlist) {
      throw SettingError(arg_path("train_size"),
                         ::oml::detail::concat(who, ": train_size ", o.train_size, " is smaller than nlist ",
                                               r.nlist, " (k-means needs a point per list)"));
    }
    r.train_size = std::min(o.train_size, g);
  } else {
    // 40 points per list: just above Faiss's 39-point minimum; k-means cost grows with it.
    r.train_size = std::min(g, std::max<int64_t>(40 * r.nlist, 16384));
  }
  return r;
}

struct PqCodes {
  int64_t m = 0;
  int64_t train_size = 0;  // the IVF lists' sample, raised to 4 x 2^nbits for the codebooks
};

[[maybe_unused]] PqCodes resolve_pq(const IvfPqOptions& o, const std::string& who, int64_t g, int64_t dim,
                                    int64_t ivf_train_size) {
  PqCodes r;
  if (o.m > 0) {
    if (dim % o.m != 0) {
      throw SettingError(arg_path("m"),
                         ::oml::detail::concat(who, ": m ", o.m, " does not divide the embedding dimension ",
                                               dim, " (each sub-quantizer codes D / m values)"));
    }
    r.m = o.m;
  } else {
    r.m = 1;
    for (int64_t d = 1; d <= std::max<int64_t>(1, dim / 4); ++d) {
      if (dim % d == 0) r.m = d;
    }
  }
  const int64_t codebook = int64_t{1} << o.nbits;
  if (g < codebook) {
    throw SettingError(arg_path("nbits"),
                       ::oml::detail::concat(who, ": nbits ", o.nbits, " needs at least ", codebook,
                                             " gallery items to train its codebooks, the "
                                             "gallery has ",
                                             g, "; lower nbits or use faiss_ivf / exact"));
  }
  r.train_size = std::max(ivf_train_size, std::min(g, codebook * 4));
  return r;
}

#if OML_HAVE_FAISS

// faiss::idx_t is Faiss 1.7.4's spelling; Debian 12 ships 1.7.3.
using FaissId = faiss::Index::idx_t;
static_assert(sizeof(FaissId) == sizeof(int64_t), "Faiss ids are gallery positions (int64)");

// The Faiss metric of each measure, and back: an index keeps its metric in its file.
faiss::MetricType metric_of(Measure measure) {
  return measure == Measure::negative_dot ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
}
Measure measure_of(const faiss::Index& index) {
  return index.metric_type == faiss::METRIC_INNER_PRODUCT ? Measure::negative_dot : Measure::euclidean;
}
const char* measure_name(Measure measure) {
  return measure == Measure::negative_dot ? "inner-product (distance: dot)" : "Euclidean";
}
// A flat index of the measure: the exhaustive kind, and the IVF kinds' coarse quantizer.
faiss::IndexFlat* new_flat(FaissId dim, Measure measure) {
  if (measure == Measure::negative_dot) return new faiss::IndexFlatIP(dim);
  return new faiss::IndexFlatL2(dim);
}

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

// The seeded sample of `n` of `ng` rows (partial Fisher-Yates), ascending so that a memory-mapped
// gallery is read in order. `purpose` separates the streams (training, tuning).
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

// A search parameter target_recall chooses: its name, the range searched, how a value is applied
// (to the built index, or to the re-ranking factor).
struct Knob {
  const char* name;
  int64_t low;
  int64_t high;
  std::function<void(int64_t)> set;
};

// Leaves `knob` at the smallest value in [low, high] whose recall() reaches `target` — doubling
// from `low`, then halving the gap down to 1/16 of the value (recall rises with each of these
// parameters; the last 6 % are not worth more searches) — or at `high` when none does.
struct Raised {
  int64_t value = 0;    // the value left set
  double recall = 0.0;  // the recall at it
};
Raised raise_until(const Knob& knob, double target, const std::function<double()>& recall) {
  int64_t below = knob.low - 1;  // largest value known to fall short
  int64_t value = knob.low;
  double reached = 0.0;
  while (true) {
    knob.set(value);
    reached = recall();
    if (reached >= target || value >= knob.high) break;
    below = value;
    value = std::min(knob.high, value * 2);
  }
  if (reached < target) return {value, reached};
  while (value - below > std::max<int64_t>(1, value / 16)) {
    const int64_t middle = below + (value - below) / 2;
    knob.set(middle);
    const double at_middle = recall();
    if (at_middle >= target) {
      value = middle;
      reached = at_middle;
    } else {
      below = middle;
    }
  }
  knob.set(value);
  return {value, reached};
}

// IVF's nprobe where target_recall chooses it: from the fixed default to every list.
std::vector<Knob> nprobe_knob(faiss::Index& index, const IvfOptions& o) {
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(&index);
  if (o.nprobe > 0 || ivf == nullptr) return {};
  const auto nlist = static_cast<int64_t>(ivf->nlist);
  return {Knob{"nprobe", fixed_default_nprobe(nlist), nlist,
               [ivf](int64_t value) { ivf->nprobe = static_cast<std::size_t>(value); }}};
}

// An index of one kind for one gallery, before the gallery is added.
struct PlannedIndex {
  std::unique_ptr<faiss::Index> index;
  std::string description;  // name and every parameter, as resolved for this gallery
  int64_t train_size = 0;   // rows of the gallery to train on (an index that needs training)
};

class FaissBackend;

// What a kind keeps of a built index between its searches, so that a search does not redo it:
// IVF-Flat's list scanner with the norms of every list item (O(G D) to compute, against the
// O(nprobe G / nlist D) of scanning one query's lists). It may point into the index's lists, so it is
// made again whenever the index changes; searches only read it, so several may share it.
struct SearchState {
  virtual ~SearchState() = default;
};

// A Faiss index over one gallery (gallery_index.h): the CPU index, which add() / remove() change
// and write() saves, and with GPU Faiss its copy on the GPU, which is searched.
class FaissGalleryIndex final : public GalleryIndex {
 public:
  FaissGalleryIndex(const FaissBackend& backend, ItemSet gallery, std::unique_ptr<faiss::Index> index,
                    int64_t refine, std::optional<RecallEstimate> tuned, Measure measure);

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

// What the Faiss backends share: adding the gallery in chunks, training on a seeded sample,
// searching in chunks, re-ranking candidates exactly, moving the index to a GPU. Each kind
// (below) says how its index is made and searched.
class FaissBackend : public RetrievalBackend {
 public:
  FaissBackend(std::string name, ChunkOptions chunks, TuneOptions tune, uint64_t seed, int cuda_device)
      : name_(std::move(name)), chunks_(chunks), tune_(tune), seed_(seed), cuda_device_(cuda_device) {}

  std::string name() const override { return name_; }
  bool supports(Measure) const override { return true; }  // L2 or inner-product indexes

  std::optional<RecallEstimate> tuned_recall() const override {
    const std::lock_guard<std::mutex> lock(tuned_mutex_);
    return tuned_;
  }

  RetrievalResults search(const ItemSet& queries, const ItemSet& gallery,
                          const KnnOptions& options) const override {
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

  std::unique_ptr<GalleryIndex> build_index(ItemSet gallery, const KnnOptions& options) const override {
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

  std::unique_ptr<GalleryIndex> load_index(ItemSet gallery, const std::filesystem::path& file,
                                           const std::map<std::string, int64_t>& parameters,
                                           Measure measure) const override {
    if (file.empty()) {
      OML_CHECK(!writes_index(), DataError, "retrieval backend '", name_,
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
    }
    const int64_t ng = gallery.embeddings.size(0);
    OML_CHECK(holds_kind(*index), DataError, file.string(), ": holds another kind of Faiss index than '",
              name_, "' builds");
    OML_CHECK(index->d == gallery.embeddings.size(1) && index->ntotal == ng, DataError, file.string(),
              ": holds ", index->ntotal, " vectors of dimension ", index->d, ", the gallery has ", ng, " of ",
              gallery.embeddings.size(1));
    OML_CHECK(measure_of(*index) == measure, DataError, file.string(), ": holds an index for ",
              measure_name(measure_of(*index)), " search, expected one for ", measure_name(measure),
              " search (the index folder's retrieval_backend.distance)");
    int64_t refine = this->refine();
    apply_parameters(*index, refine, parameters);
    return std::make_unique<FaissGalleryIndex>(*this, std::move(gallery), std::move(index), refine,
                                               std::nullopt, measure);
  }

  /// The results of `index` (built over `gallery`) for `queries`.
  /// `prepared`: the gallery's ids and labels indexed once (null: here); `state`: search_state()
  /// of `index` as it is now (null: made for this search where the kind needs one).
  RetrievalResults search_built(const faiss::Index& index, int64_t refine, const ItemSet& queries,
                                const ItemSet& gallery, const KnnOptions& options,
                                const detail::PreparedGallery* prepared = nullptr,
                                const SearchState* state = nullptr) const {
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
    OML_CHECK(g.size(1) == q.size(1), DataError, "queries have dimension ", q.size(1),
              " but the gallery has ", g.size(1));
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

  /// The search parameters of `index` that a saved index keeps (nprobe, ef_search, refine).
  virtual std::map<std::string, int64_t> parameters(const faiss::Index& index, int64_t refine) const {
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

  /// Sets the parameters() of a loaded `index`; DataError for one this kind does not have.
  void apply_parameters(faiss::Index& index, int64_t& refine,
                        const std::map<std::string, int64_t>& values) const {
    for (const auto& [key, value] : values) {
      OML_CHECK(value >= 1, DataError, "search parameter ", key, " must be >= 1, got ", value);
      auto* ivf = dynamic_cast<faiss::IndexIVF*>(&index);
      auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(&index);
      if (key == "nprobe" && ivf != nullptr) {
        ivf->nprobe = static_cast<std::size_t>(std::min<int64_t>(value, static_cast<int64_t>(ivf->nlist)));
      } else if (key == "ef_search" && hnsw != nullptr) {
        hnsw->hnsw.efSearch = static_cast<int>(value);
      } else if (key == "refine" && parameters(index, refine).count("refine") > 0) {
        refine = std::min(value, kMaxRefine);
      } else {
        throw DataError("search parameter '" + key + "' does not belong to a " + name_ + " index");
      }
    }
  }

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
  void configure_ivf(faiss::IndexIVF& ivf, int64_t nprobe) const {
    ivf.nprobe = static_cast<std::size_t>(nprobe);
    ivf.cp.seed = static_cast<int>(seed_ & 0x7fffffff);
    // The training sample is ours (train_size); Faiss must neither subsample it nor warn that
    // fewer than 39 points per list were given.
    ivf.cp.min_points_per_centroid = 1;
    ivf.cp.max_points_per_centroid = 1 << 30;
  }

  int seed31() const { return static_cast<int>(seed_ & 0x7fffffff); }
  const std::string& backend_name() const { return name_; }
  const ChunkOptions& chunks() const { return chunks_; }

 private:
  std::unique_ptr<faiss::Index> build(PlannedIndex planned, const at::Tensor& g) const {
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

  // target_recall (TuneOptions): chooses the knobs on the CPU index before it moves to a GPU,
  // logs the choice and keeps the recall reached for tuned_recall().
  std::optional<RecallEstimate> tune(faiss::Index& index, int64_t& refine, const at::Tensor& g,
                                     const ItemSet& gallery, const KnnOptions& options) const {
    const int64_t ng = g.size(0);
    const std::vector<Knob> knobs = this->knobs(index, refine, ng, options.top_k);
    if (knobs.empty()) return std::nullopt;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int64_t> rows = sample_rows(ng, tune_.tune_queries, seed_, 0x74756e65ULL);
    const auto n = static_cast<int64_t>(rows.size());
    ItemSet probe;
    probe.embeddings = at::empty({n, g.size(1)}, at::kFloat);
    io::gather_rows(g, rows.data(), rows.size(), probe.embeddings.data_ptr<float>());
    for (const int64_t row : rows) {
      probe.labels.push_back(gallery.labels[row]);
      probe.ids.push_back(gallery.ids[row]);  // each ignores itself, as a validation query does
      if (!gallery.sequences.empty()) probe.sequences.push_back(gallery.sequences[row]);
    }
    KnnOptions quiet = options;
    quiet.on_progress = nullptr;
    const RetrievalResults exact = retrieve_knn(probe, gallery, quiet);
    const IgnoredPairs ignored(probe, gallery);
    // The knobs change how the index is searched, not its lists: one state serves every try.
    const std::unique_ptr<SearchState> state = search_state(index);
    const auto recall = [&] {
      RetrievalResults found = results_skeleton(probe, gallery, ignored);
      search_index(index, probe.embeddings, g, ignored, quiet, refine, state.get(), found);
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += list_recall(found, i, exact, i);
      return n > 0 ? sum / static_cast<double>(n) : 1.0;
    };
    double reached = 0.0;
    std::string chosen;
    for (const Knob& knob : knobs) {
      const Raised raised = raise_until(knob, tune_.target_recall, recall);
      reached = raised.recall;
      chosen += ::oml::detail::concat(" ", knob.name, "=", raised.value);
      if (reached >= tune_.target_recall) break;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string measured = ::oml::detail::concat("recall@", options.top_k, " ", reached, " on ", n,
                                                       " gallery items searched as queries, ", seconds, " s");
    if (reached >= tune_.target_recall) {
      log::info(::oml::detail::concat(name_, ": target_recall ", tune_.target_recall, " chose", chosen, " (",
                                      measured, ")"));
    } else {
      log::warn(::oml::detail::concat(name_, ": target_recall ", tune_.target_recall,
                                      " is out of reach of this index: at", chosen, " ", measured, "; ",
                                      reach_hint()));
    }
    const std::lock_guard<std::mutex> lock(tuned_mutex_);
    tuned_ = RecallEstimate{options.top_k, n, reached};
    return tuned_;
  }

  // The positions stored in IVF lists after `removed` left the gallery: each shifts down by the
  // number of removed positions below it.
  static void renumber(faiss::IndexIVF& ivf, const std::vector<int64_t>& removed) {
    // Built or read, an IVF index keeps its lists in memory (ArrayInvertedLists).
    auto* lists = dynamic_cast<faiss::ArrayInvertedLists*>(ivf.invlists);
    OML_ASSERT(lists != nullptr, "IVF lists are expected in memory");
    for (std::size_t list = 0; list < ivf.nlist; ++list) {
      for (FaissId& id : lists->ids[list]) {
        id -= static_cast<FaissId>(std::lower_bound(removed.begin(), removed.end(), id) - removed.begin());
      }
    }
  }

  // k-means (and PQ codebooks) on a seeded sample of gallery rows, read in ascending order.
  void train(faiss::Index& index, const at::Tensor& g, int64_t train_size) const {
    const int64_t dim = g.size(1);
    const std::vector<int64_t> rows = sample_rows(g.size(0), train_size, seed_, 0x74726169ULL);
    const auto n = static_cast<int64_t>(rows.size());
    std::vector<float> sample(static_cast<std::size_t>(n * dim));
    io::gather_rows(g, rows.data(), rows.size(), sample.data());  // a mapped gallery stays unmapped
    index.train(n, sample.data());
  }

  void search_refined(const faiss::Index& index, const at::Tensor& q, const at::Tensor& g,
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
          if (row[j] >= 0) candidates.emplace_back(exact_key(options.measure, q, q0 + i, g, row[j]), row[j]);
        }
        append_list(out, ignored, q0 + i, candidates, options.top_k, options.measure);
      }
      if (options.on_progress) options.on_progress(q1, nq);
    });
  }

  // Candidates are scattered over the gallery: each row is read with gather_rows, so a
  // memory-mapped gallery does not become resident folio by folio (io/mapped_file.h).
  static double exact_key(Measure measure, const at::Tensor& q, int64_t qi, const at::Tensor& g, int64_t gi) {
    const int64_t dim = q.size(1);
    thread_local std::vector<float> row;
    row.resize(static_cast<std::size_t>(dim));
    io::gather_rows(g, &gi, 1, row.data());
    return detail::exact_key(measure, q.data_ptr<float>() + qi * dim, row.data(), dim);
  }

  std::string name_;
  ChunkOptions chunks_;
  TuneOptions tune_;
  uint64_t seed_;
  int cuda_device_;
  mutable std::mutex tuned_mutex_;
  mutable std::optional<RecallEstimate> tuned_;
#if OML_HAVE_FAISS_GPU
  mutable std::shared_ptr<faiss::gpu::StandardGpuResources> gpu_resources_;
#endif
};

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

// ---- FaissGalleryIndex ------------------------------------------------------------------------

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

class FlatBackend final : public FaissBackend {
 public:
  FlatBackend(std::string name, FlatOptions o, uint64_t seed, int cuda)
      : FaissBackend(std::move(name), o.chunks, TuneOptions{0.0, 1}, seed, cuda) {}

 protected:
  PlannedIndex plan(int64_t, int64_t dim, Measure measure) const override {
    return {std::unique_ptr<faiss::Index>(new_flat(static_cast<FaissId>(dim), measure)), backend_name(), 0};
  }
  // IndexFlatL2 ranks in float32, where ||q||^2 + ||g||^2 - 2 q.g cancels for close neighbours
  // and swaps near-ties; re-ranking its 2 k best by exact distances gives exact's lists, which is
  // what a cross-check of `exact` is for.
  int64_t refine() const override { return kFlatRefine; }
  bool writes_index() const override { return false; }
  bool holds_kind(const faiss::Index& index) const override {
    return dynamic_cast<const faiss::IndexFlat*>(&index) != nullptr;
  }
};

class IvfBackend final : public FaissBackend {
 public:
  IvfBackend(std::string name, IvfOptions o, uint64_t seed, int cuda)
      : FaissBackend(std::move(name), o.chunks, o.tune, seed, cuda), options_(o) {}

  std::string describe() const override {
    return name() +
           IvfLists{options_.nlist, options_.nprobe, options_.train_size, tunes_nprobe(options_)}.describe() +
           scan_text() + tune_text(options_.tune, options_.nprobe == 0);
  }

 protected:
  PlannedIndex plan(int64_t ng, int64_t dim, Measure measure) const override {
    const IvfLists r = resolve_ivf(options_, "retrieval backend '" + name() + "'", ng);
    const auto d = static_cast<FaissId>(dim);
    auto ivf = std::make_unique<faiss::IndexIVFFlat>(new_flat(d, measure), d, r.nlist, metric_of(measure));
    ivf->own_fields = true;
    configure_ivf(*ivf, r.nprobe);
    return {std::move(ivf), name() + r.describe() + scan_text(), r.train_size};
  }

  // The scanner with its lists' norms (InvertedListScanner), for the blocked scan.
  struct ListScan final : SearchState {
    explicit ListScan(InvertedListScanner s) : scanner(std::move(s)) {}
    InvertedListScanner scanner;
  };

  std::unique_ptr<SearchState> search_state(const faiss::Index& index) const override {
    const auto* cpu_ivf = dynamic_cast<const faiss::IndexIVF*>(&index);
    if (!options_.blas_scan || cpu_ivf == nullptr) return nullptr;
    return std::make_unique<ListScan>(list_scanner(*cpu_ivf));
  }

  void search_index(const faiss::Index& index, const at::Tensor& q, const at::Tensor& g,
                    const IgnoredPairs& ignored, const KnnOptions& options, int64_t refine,
                    const SearchState* state, RetrievalResults& out) const override {
    // The blocked scan reads the CPU index's lists; an index on a GPU searches there.
    const auto* cpu_ivf = dynamic_cast<const faiss::IndexIVF*>(&index);
    if (options_.blas_scan && cpu_ivf != nullptr) {
      const auto* kept = dynamic_cast<const ListScan*>(state);
      if (kept != nullptr) {
        scan_ivf_flat(*cpu_ivf, kept->scanner, q, ignored, options, out);
      } else {
        scan_ivf_flat(*cpu_ivf, list_scanner(*cpu_ivf), q, ignored, options, out);
      }
      return;
    }
    FaissBackend::search_index(index, q, g, ignored, options, refine, state, out);
  }

  std::vector<Knob> knobs(faiss::Index& index, int64_t&, int64_t, int64_t) const override {
    return nprobe_knob(index, options_);
  }
  bool holds_kind(const faiss::Index& index) const override {
    return dynamic_cast<const faiss::IndexIVFFlat*>(&index) != nullptr;
  }

 private:
  std::string scan_text() const { return options_.blas_scan ? " scan=blas" : " scan=faiss"; }

  // The scanner of `ivf`'s lists as they are now: the vectors are read from Faiss's inverted lists
  // in place, so it lasts until the lists change.
  static InvertedListScanner list_scanner(const faiss::IndexIVF& ivf) {
    static_assert(std::is_same_v<FaissId, int64_t>, "Faiss ids are read as gallery positions");
    std::vector<InvertedList> lists(ivf.nlist);
    for (std::size_t l = 0; l < ivf.nlist; ++l) {
      // IVF-Flat stores each item's float vector as its code.
      lists[l] = {static_cast<int64_t>(ivf.invlists->list_size(l)),
                  reinterpret_cast<const float*>(ivf.invlists->get_codes(l)), ivf.invlists->get_ids(l)};
    }
    return InvertedListScanner(std::move(lists), static_cast<int64_t>(ivf.d), measure_of(ivf));
  }

  // IVF-Flat with the probed lists scanned by `scanner` (list_scanner(ivf)): Faiss's coarse
  // quantizer picks the lists, as in its own search.
  void scan_ivf_flat(const faiss::IndexIVF& ivf, const InvertedListScanner& scanner, const at::Tensor& q,
                     const IgnoredPairs& ignored, const KnnOptions& options, RetrievalResults& out) const {
    const int64_t dim = q.size(1);
    const int64_t nq = q.size(0);
    const auto nprobe = static_cast<int64_t>(ivf.nprobe);
    std::vector<float> coarse_distances;
    std::vector<FaissId> probes;
    const int64_t chunk = InvertedListScanner::chunk_rows(chunks().search_chunk, options.top_k);
    for_each_row_chunk(q, chunk, [&](int64_t q0, int64_t q1) {
      const float* rows = q.data_ptr<float>() + q0 * dim;
      coarse_distances.resize(static_cast<std::size_t>((q1 - q0) * nprobe));
      probes.resize(coarse_distances.size());
      ivf.quantizer->search(q1 - q0, rows, nprobe, coarse_distances.data(), probes.data());
      scanner.scan(rows, q1 - q0, q0, probes.data(), nprobe, ignored, options.top_k, out);
      if (options.on_progress) options.on_progress(q1, nq);
    });
  }

  IvfOptions options_;
};

class HnswBackend final : public FaissBackend {
 public:
  HnswBackend(std::string name, HnswOptions o, uint64_t seed, int cuda)
      : FaissBackend(std::move(name), o.chunks, o.tune, seed, cuda), options_(o) {}

  std::string describe() const override { return name() + params(); }
  // Measured (docs/ddp.md): HNSW threads insert nodes concurrently, so its graph depends on
  // their timing (the other kinds are identical byte for byte whatever the threads).
  bool deterministic_build(int num_threads) const override { return num_threads <= 1; }

 protected:
  PlannedIndex plan(int64_t, int64_t dim, Measure measure) const override {
    auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<FaissId>(dim),
                                                       static_cast<int>(options_.M), metric_of(measure));
    hnsw->hnsw.efConstruction = static_cast<int>(options_.ef_construction);
    hnsw->hnsw.efSearch = static_cast<int>(options_.ef_search > 0 ? options_.ef_search : kDefaultEfSearch);
    return {std::move(hnsw), name() + params(), 0};
  }

  std::string reach_hint() const override {
    return "a larger M or ef_construction builds a graph that reaches more, or use exact";
  }
  bool holds_kind(const faiss::Index& index) const override {
    return dynamic_cast<const faiss::IndexHNSWFlat*>(&index) != nullptr;
  }
  // Faiss's HNSW cannot unlink nodes: the graph is built again over the remaining items.
  IndexUpdates remove_updates() const override { return IndexUpdates::kRebuild; }

  // ef_search where target_recall chooses it: from the fixed default (128) to the gallery size.
  std::vector<Knob> knobs(faiss::Index& index, int64_t&, int64_t ng, int64_t) const override {
    auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(&index);
    if (options_.ef_search > 0 || hnsw == nullptr) return {};
    return {Knob{"ef_search", std::min(kDefaultEfSearch, ng), std::max(kDefaultEfSearch, ng),
                 [hnsw](int64_t value) { hnsw->hnsw.efSearch = static_cast<int>(value); }}};
  }

 private:
  std::string params() const {
    const bool tuned = options_.ef_search == 0 && options_.tune.on();
    return param("M", options_.M) + param("ef_construction", options_.ef_construction) +
           (tuned ? std::string(" ef_search=by target_recall") : param("ef_search", options_.ef_search)) +
           tune_text(options_.tune, tuned);
  }

  HnswOptions options_;
};

class IvfPqBackend final : public FaissBackend {
 public:
  IvfPqBackend(std::string name, IvfPqOptions o, uint64_t seed, int cuda)
      : FaissBackend(std::move(name), o.ivf.chunks, o.ivf.tune, seed, cuda), options_(o) {}

  std::string describe() const override {
    return name() +
           IvfLists{options_.ivf.nlist, options_.ivf.nprobe, options_.ivf.train_size,
                    tunes_nprobe(options_.ivf)}
               .describe() +
           codes(options_.m) + tune_text(options_.ivf.tune, options_.ivf.nprobe == 0 || options_.refine == 0);
  }

 protected:
  PlannedIndex plan(int64_t ng, int64_t dim, Measure measure) const override {
    const std::string who = "retrieval backend '" + name() + "'";
    IvfLists r = resolve_ivf(options_.ivf, who, ng);
    const PqCodes pq = resolve_pq(options_, who, ng, dim, r.train_size);
    r.train_size = pq.train_size;
    const auto d = static_cast<FaissId>(dim);
    auto index = std::make_unique<faiss::IndexIVFPQ>(new_flat(d, measure), d, r.nlist, pq.m, options_.nbits,
                                                     metric_of(measure));
    index->own_fields = true;
    configure_ivf(*index, r.nprobe);
    index->pq.cp.seed = seed31();
    // The gallery-size check (2^nbits items) is ours; no warning per sub-quantizer.
    index->pq.cp.min_points_per_centroid = 1;
    return {std::move(index), name() + r.describe() + codes(pq.m), r.train_size};
  }
  // PQ distances are approximate: re-rank refine x k candidates by exact distances.
  int64_t refine() const override { return options_.refine > 0 ? options_.refine : kDefaultRefine; }

  std::string reach_hint() const override {
    return "finer codes (a larger m or nbits), refine left to target_recall (0), or faiss_ivf / exact";
  }
  bool holds_kind(const faiss::Index& index) const override {
    return dynamic_cast<const faiss::IndexIVFPQ*>(&index) != nullptr;
  }
  std::map<std::string, int64_t> parameters(const faiss::Index& index, int64_t refine) const override {
    std::map<std::string, int64_t> out = FaissBackend::parameters(index, refine);
    out["refine"] = refine;
    return out;
  }

  // nprobe first; where every list probed falls short (PQ's codes lose too much), refine.
  std::vector<Knob> knobs(faiss::Index& index, int64_t& refine, int64_t, int64_t) const override {
    std::vector<Knob> out = nprobe_knob(index, options_.ivf);
    if (options_.refine == 0) {
      out.push_back(Knob{"refine", kDefaultRefine, kMaxRefine, [&refine](int64_t value) { refine = value; }});
    }
    return out;
  }

 private:
  std::string codes(int64_t m) const {
    return param("m", m) + param("nbits", options_.nbits) + param("refine", refine());
  }

  IvfPqOptions options_;
};

#endif  // OML_HAVE_FAISS

// Registers backend `name` whose args are read into Options and built as Backend. Without Faiss
// the args are read alike and the parse then reports that the build has no Faiss.
template <class Options, class Backend>
void add_kind(Registries& registries, const std::string& name) {
  registries.retrieval_backends.add(
      name,
      [](config::ArgsReader& reader) {
        Options options;
        options.read(reader, reader.component());
        if (!OML_HAVE_FAISS) {
          throw ConfigError(reader.component() +
                            ": this oml-cpp was built without Faiss; install libfaiss-dev (scripts/setup.sh) "
                            "and rebuild, or use retrieval_backend: {name: exact}");
        }
        return options;
      },
      [name](const Options& options, const BackendContext& context) -> std::shared_ptr<RetrievalBackend> {
#if OML_HAVE_FAISS
        return std::make_shared<Backend>(name, options, context.seed, context.cuda_device);
#else
        (void)options;
        (void)context;
        throw InternalError("retrieval backend '" + name + "' built without Faiss: its parse refuses it");
#endif
      },
      Options::kHelp);
}

}  // namespace

#if !OML_HAVE_FAISS
// Without Faiss the backend types are never built; these names stand in for them.
class FlatBackend;
class IvfBackend;
class HnswBackend;
class IvfPqBackend;
#endif

void register_faiss_backends(Registries& registries) {
  add_kind<FlatOptions, FlatBackend>(registries, "faiss_flat");
  add_kind<IvfOptions, IvfBackend>(registries, "faiss_ivf");
  add_kind<HnswOptions, HnswBackend>(registries, "faiss_hnsw");
  add_kind<IvfPqOptions, IvfPqBackend>(registries, "faiss_ivf_pq");
}

}  // namespace detail

}  // namespace oml::retrieval
