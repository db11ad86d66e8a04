#include "training/best_checkpoints.h"

#include <cmath>

namespace oml::pipelines {

BestCheckpoints::BestCheckpoints(int64_t save_top_k, bool maximise)
    : save_top_k_(save_top_k), maximise_(maximise) {}

std::size_t BestCheckpoints::worst() const {
  std::size_t at = 0;
  for (std::size_t i = 1; i < kept_.size(); ++i) {
    if (better(kept_[at].second, kept_[i].second)) at = i;
  }
  return at;
}

std::optional<double> BestCheckpoints::best() const {
  std::optional<double> best;
  for (const auto& entry : kept_) {
    if (!best || better(entry.second, *best)) best = entry.second;
  }
  return best;
}

BestCheckpoints::Decision BestCheckpoints::offer(double value, int64_t epoch, int64_t step) {
  Decision decision;
  if (save_top_k_ == 0 || !std::isfinite(value)) return decision;
  if (save_top_k_ == 1) {
    if (!kept_.empty() && !better(value, kept_.front().second)) return decision;
    kept_.assign(1, {kBestCheckpoint, value});  // overwritten in place: nothing to remove
    decision.save = decision.is_best = true;
    decision.file = kBestCheckpoint;
    return decision;
  }
  const std::string file = "epoch=" + std::to_string(epoch) + "-step=" + std::to_string(step) + ".ckpt";
  // A resumed run that repeats a validation it had kept (its last.ckpt is older) replaces the entry.
  std::erase_if(kept_, [&](const auto& entry) { return entry.first == file; });
  const std::optional<double> best_before = best();
  if (save_top_k_ > 0 && static_cast<int64_t>(kept_.size()) >= save_top_k_) {
    const std::size_t out = worst();
    if (!better(value, kept_[out].second)) return decision;
    // best.ckpt (kept by a run resumed with a larger save_top_k) is replaced, never removed.
    if (kept_[out].first != kBestCheckpoint) decision.removed = kept_[out].first;
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(out));
  }
  decision.save = true;
  decision.file = file;
  decision.is_best = !best_before || better(value, *best_before);
  kept_.emplace_back(file, value);
  return decision;
}

void BestCheckpoints::restore(std::vector<std::pair<std::string, double>> kept, std::optional<double> best) {
  // save_top_k 1 compares with the best value alone, whatever the run kept before.
  if (!kept.empty() && save_top_k_ != 1) {
    kept_ = std::move(kept);
  } else if (best) {
    kept_.assign(1, {kBestCheckpoint, *best});
  }
}

}  // namespace oml::pipelines
