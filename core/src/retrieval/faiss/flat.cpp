// faiss_flat: exhaustive IndexFlatL2 (IndexFlatIP for dot), its 2 k best re-ranked exactly — a
// cross-check of `exact`.
#include "backend.h"
#include "kinds.h"

namespace oml::retrieval::detail {

namespace {

class FlatBackend final : public FaissBackend {
 public:
  FlatBackend(std::string name, const FlatOptions& o, uint64_t seed, int cuda)
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

}  // namespace

std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const FlatOptions& options,
                                                     uint64_t seed, int cuda_device) {
  return std::make_shared<FlatBackend>(name, options, seed, cuda_device);
}

}  // namespace oml::retrieval::detail
