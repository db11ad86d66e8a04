// faiss_hnsw: an HNSW graph (IndexHNSWFlat), its ef_search chosen by target_recall.
#include <faiss/IndexHNSW.h>

#include "backend.h"
#include "kinds.h"

namespace oml::retrieval::detail {

namespace {

class HnswBackend final : public FaissBackend {
 public:
  HnswBackend(std::string name, const HnswOptions& o, uint64_t seed, int cuda)
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

}  // namespace

std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const HnswOptions& options,
                                                     uint64_t seed, int cuda_device) {
  return std::make_shared<HnswBackend>(name, options, seed, cuda_device);
}

}  // namespace oml::retrieval::detail
