// target_recall (options.h): the values of the knobs each kind names, chosen on a seeded sample
// of the gallery searched as queries against the exact k-NN.
#include "tuning.h"

#include <chrono>

#include "../candidate_lists.h"
#include "backend.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"

namespace oml::retrieval::detail {

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

std::optional<RecallEstimate> FaissBackend::tune(faiss::Index& index, int64_t& refine, const at::Tensor& g,
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

}  // namespace oml::retrieval::detail
