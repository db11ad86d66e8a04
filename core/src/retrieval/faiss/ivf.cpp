// faiss_ivf: IVF-Flat, its probed lists scanned as GEMM blocks (InvertedListScanner,
// oml/retrieval/detail/inverted_list_scan.h) or by Faiss's own loop (scan: faiss); and the IVF
// parameters that faiss_ivf_pq shares (ivf.h).
#include "ivf.h"

#include <faiss/IndexIVFFlat.h>

#include <cmath>
#include <type_traits>

#include "backend.h"
#include "kinds.h"
#include "oml/common/error.h"
#include "oml/retrieval/detail/inverted_list_scan.h"

namespace oml::retrieval::detail {

std::string IvfLists::describe() const {
  return param("nlist", nlist) +
         (nprobe_tuned ? std::string(" nprobe=by target_recall") : param("nprobe", nprobe)) +
         param("train_size", train_size);
}

bool tunes_nprobe(const IvfOptions& o) { return o.nprobe == 0 && o.tune.on(); }

int64_t fixed_default_nprobe(int64_t nlist) { return std::clamp<int64_t>(nlist / 16, 1, kMaxAutoNprobe); }

IvfLists resolve_ivf(const IvfOptions& o, const std::string& who, int64_t g) {
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

std::vector<Knob> nprobe_knob(faiss::Index& index, const IvfOptions& o) {
  auto* ivf = dynamic_cast<faiss::IndexIVF*>(&index);
  if (o.nprobe > 0 || ivf == nullptr) return {};
  const auto nlist = static_cast<int64_t>(ivf->nlist);
  return {Knob{"nprobe", fixed_default_nprobe(nlist), nlist,
               [ivf](int64_t value) { ivf->nprobe = static_cast<std::size_t>(value); }}};
}

namespace {

class IvfBackend final : public FaissBackend {
 public:
  IvfBackend(std::string name, const IvfOptions& o, uint64_t seed, int cuda)
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

}  // namespace

std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const IvfOptions& options,
                                                     uint64_t seed, int cuda_device) {
  return std::make_shared<IvfBackend>(name, options, seed, cuda_device);
}

}  // namespace oml::retrieval::detail
