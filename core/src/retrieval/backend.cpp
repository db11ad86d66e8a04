// The retrieval-backend kind: `exact`, the shared candidate-list rules, recall measurement.
#include "oml/retrieval/backend.h"

#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "candidate_lists.h"
#include "faiss/register.h"
#include "oml/common/error.h"
#include "oml/common/random.h"
#include "oml/config/reader.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/gallery_index.h"
#include "oml/retrieval/sharded_knn.h"

namespace oml::retrieval {

namespace {

// `exact` over one gallery searched many times: the gallery's norms, id positions and label
// counts are computed once (and again after a change), not at every search.
class ExactGalleryIndex final : public GalleryIndex {
 public:
  explicit ExactGalleryIndex(ItemSet gallery)
      : GalleryIndex(std::move(gallery)),
        prepared_(std::make_unique<detail::PreparedGallery>(this->gallery())) {}

  RetrievalResults search(const ItemSet& queries, const KnnOptions& options) const override {
    OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
    validate_item_set(queries, "query");
    const detail::PreparedPair pair(queries, *prepared_, options.measure);
    const IgnoredPairs ignored(queries, gallery(), prepared_.get());
    return detail::retrieve_knn_fused(queries, gallery(), pair, ignored, options, {}, prepared_.get());
  }
  std::string describe() const override { return "exact"; }

 protected:
  void added(int64_t first) override { prepared_->appended(gallery(), first); }
  void removed(const std::vector<int64_t>& removed) override { prepared_->removed(gallery(), removed); }

 private:
  std::unique_ptr<detail::PreparedGallery> prepared_;
};

class ExactBackend final : public RetrievalBackend {
 public:
  RetrievalResults search(const ItemSet& queries, const ItemSet& gallery,
                          const KnnOptions& options) const override {
    return retrieve_knn(queries, gallery, options);
  }
  std::unique_ptr<GalleryIndex> build_index(ItemSet gallery, const KnnOptions&) const override {
    return std::make_unique<ExactGalleryIndex>(std::move(gallery));
  }
  std::unique_ptr<GalleryIndex> load_index(ItemSet gallery, const std::filesystem::path& file,
                                           const std::map<std::string, int64_t>& parameters,
                                           Measure) const override {
    OML_CHECK(
        file.empty() && parameters.empty(), DataError, file.string(),
        ": the exact backend keeps no index file or search parameters; this index was written by another "
        "backend");
    return std::make_unique<ExactGalleryIndex>(std::move(gallery));
  }
  bool supports(Measure) const override { return true; }
  bool exact() const override { return true; }
  std::string name() const override { return "exact"; }
};

}  // namespace

std::shared_ptr<RetrievalBackend> make_exact_backend() { return std::make_shared<ExactBackend>(); }

// --- candidate lists ------------------------------------------------------------------------

namespace detail {

RetrievalResults results_skeleton(const ItemSet& queries, const ItemSet& gallery, const IgnoredPairs& ignored,
                                  const PreparedGallery* prepared) {
  RetrievalResults out;
  out.n_gt = count_ground_truth(queries, gallery, ignored, prepared);
  out.query_labels = queries.labels;
  out.gallery_labels = gallery.labels;
  out.query_ids = queries.ids;
  out.gallery_ids = gallery.ids;
  out.offsets.assign(1, 0);
  return out;
}

int64_t candidates_needed(const IgnoredPairs& ignored, int64_t top_k, int64_t gallery_size) {
  std::unordered_map<int64_t, int64_t> sequence_size;
  int64_t largest = 0;
  for (const int64_t sequence : ignored.gallery_sequences()) {
    if (sequence >= 0) largest = std::max(largest, ++sequence_size[sequence]);
  }
  return std::max<int64_t>(1, std::min(gallery_size, top_k + 1 + largest));
}

void append_list(RetrievalResults& out, const IgnoredPairs& ignored, int64_t q,
                 std::vector<std::pair<double, int64_t>>& candidates, int64_t top_k, Measure measure) {
  OML_ASSERT(out.num_queries() == q, "lists must be appended in query order");
  std::sort(candidates.begin(), candidates.end());
  int64_t kept = 0;
  int64_t previous = -1;
  for (const auto& [key, position] : candidates) {
    if (kept == top_k) break;
    // Sorted by (distance, position), so a duplicate follows its twin.
    if (position == previous || ignored.contains(q, position)) continue;
    previous = position;
    out.retrieved.push_back(position);
    out.distances.push_back(static_cast<float>(distance_of_key(measure, key)));
    ++kept;
  }
  out.offsets.push_back(static_cast<int64_t>(out.retrieved.size()));
}

void append_list(RetrievalResults& out, const IgnoredPairs& ignored, int64_t q, const int64_t* positions,
                 const float* keys, int64_t n, int64_t top_k, Measure measure) {
  std::vector<std::pair<double, int64_t>> candidates;
  candidates.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (positions[i] < 0) continue;
    OML_ASSERT(positions[i] < out.num_gallery(), "query ", q, ": the index returned position ", positions[i]);
    candidates.emplace_back(static_cast<double>(keys[i]), positions[i]);
  }
  append_list(out, ignored, q, candidates, top_k, measure);
}

double list_recall(const RetrievalResults& approximate, int64_t a, const RetrievalResults& exact, int64_t e) {
  if (exact.size(e) == 0) return 1.0;
  const std::unordered_set<int64_t> found(approximate.retrieved.begin() + approximate.begin(a),
                                          approximate.retrieved.begin() + approximate.end(a));
  int64_t hits = 0;
  for (int64_t j = exact.begin(e); j < exact.end(e); ++j)
    hits += static_cast<int64_t>(found.count(exact.retrieved[j]));
  return static_cast<double>(hits) / static_cast<double>(exact.size(e));
}

}  // namespace detail

// --- recall ---------------------------------------------------------------------------------

std::string recall_metric_key(int64_t k) { return "OVERALL/knn_recall/" + std::to_string(k); }

RecallEstimate measure_recall(const RetrievalResults& approximate, const ItemSet& queries,
                              const ItemSet& gallery, const KnnOptions& options, int64_t sample,
                              uint64_t seed, distributed::ProcessGroup* group) {
  if (sample <= 0) {
    throw SettingError("retrieval_backend.report_recall", "must be positive, got " + std::to_string(sample));
  }
  const int64_t nq = approximate.num_queries();
  OML_ASSERT(nq == queries.embeddings.size(0));
  // A seeded partial Fisher-Yates shuffle: the same queries for the same seed and size.
  std::vector<int64_t> order(static_cast<std::size_t>(nq));
  std::iota(order.begin(), order.end(), int64_t{0});
  const int64_t n = std::min(sample, nq);
  std::mt19937_64 rng(derive_seed(seed, {0x7265636131ULL}));
  for (int64_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, nq - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  std::vector<int64_t> chosen(order.begin(), order.begin() + n);
  std::sort(chosen.begin(), chosen.end());

  ItemSet subset;
  subset.embeddings = queries.embeddings.index_select(0, at::tensor(chosen, at::kLong));
  for (const int64_t q : chosen) {
    subset.labels.push_back(queries.labels[q]);
    subset.ids.push_back(queries.ids[q]);
    if (!queries.sequences.empty()) subset.sequences.push_back(queries.sequences[q]);
  }
  KnnOptions exact_options = options;
  exact_options.on_progress = nullptr;
  const RetrievalResults exact = group != nullptr
                                     ? retrieve_knn_sharded(*group, subset, gallery, exact_options)
                                     : retrieve_knn(subset, gallery, exact_options);

  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += detail::list_recall(approximate, chosen[i], exact, i);
  RecallEstimate estimate;
  estimate.k = options.top_k;
  estimate.queries = n;
  estimate.recall = n > 0 ? sum / static_cast<double>(n) : 1.0;
  return estimate;
}

// --- registration ---------------------------------------------------------------------------

void register_builtin_retrieval_backends(Registries& registries) {
  registries.retrieval_backends.add(
      "exact", no_args,
      [](NoOptions, const BackendContext&) -> std::shared_ptr<RetrievalBackend> {
        return make_exact_backend();
      },
      "(no args; the default) chunked exact k-NN in double precision; the only backend for fnmr@fmr");
  detail::register_faiss_backends(registries);
}

}  // namespace oml::retrieval
