// faiss_ivf_pq: IVF with product quantisation (IndexIVFPQ), its refine x k candidates re-ranked
// by exact distances; the lists' parameters as faiss_ivf's (ivf.h).
#include <faiss/IndexIVFPQ.h>

#include "backend.h"
#include "ivf.h"
#include "kinds.h"
#include "oml/common/error.h"

namespace oml::retrieval::detail {

namespace {

struct PqCodes {
  int64_t m = 0;
  int64_t train_size = 0;  // the IVF lists' sample, raised to 4 x 2^nbits for the codebooks
};

PqCodes resolve_pq(const IvfPqOptions& o, const std::string& who, int64_t g, int64_t dim,
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

class IvfPqBackend final : public FaissBackend {
 public:
  IvfPqBackend(std::string name, const IvfPqOptions& o, uint64_t seed, int cuda)
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

}  // namespace

std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const IvfPqOptions& options,
                                                     uint64_t seed, int cuda_device) {
  return std::make_shared<IvfPqBackend>(name, options, seed, cuda_device);
}

}  // namespace oml::retrieval::detail
