#pragma once
// The checkpoints `save_top_k` keeps, ranked by metric_for_checkpointing as Lightning's
// ModelCheckpoint ranks them (docs/training.md#checkpoints):
//
//   BestCheckpoints best(config.controls.checkpointing.save_top_k, maximise);
//   const auto kept = best.offer(value, epoch, step);
//   if (kept.save) { write kept.file; if (kept.is_best && kept.file != "best.ckpt") best.ckpt too;
//                    remove kept.removed }
//
// save_top_k 1 keeps best.ckpt (OML's ModelCheckpoint filename), overwritten by each better value.
// k > 1 (or -1, all) keeps "epoch=E-step=S.ckpt" files (Lightning's default names: the 0-based
// epoch and the optimizer step), best.ckpt being the best of them; once k are kept a new one must
// beat the worst, which is removed (ties: the one kept first). 0 keeps none. Values that are not
// finite are never kept (Lightning keeps a NaN as the worst while fewer than k are kept). Pure
// bookkeeping: it writes no file.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace oml::pipelines {

inline constexpr const char* kBestCheckpoint = "best.ckpt";

class BestCheckpoints {
 public:
  /// `save_top_k` >= -1 (the config checks it); `maximise`: mode_for_checkpointing max.
  BestCheckpoints(int64_t save_top_k, bool maximise);

  struct Decision {
    bool save = false;
    std::string file;                    ///< the new checkpoint's file name in checkpoints/
    bool is_best = false;                ///< the best so far: best.ckpt holds it
    std::optional<std::string> removed;  ///< the file that leaves the top k
  };
  /// Offers the validation after epoch `epoch` (0-based), at optimizer step `step`.
  Decision offer(double value, int64_t epoch, int64_t step);

  /// The best value kept (none before the first).
  std::optional<double> best() const;
  /// The kept files and their values, in the order they were kept (resume.best_k_models).
  const std::vector<std::pair<std::string, double>>& kept() const { return kept_; }
  /// Continues a resumed run's ranking: `kept` from its checkpoint, or for a checkpoint without
  /// it (save_top_k 1, or an earlier build) best.ckpt with the checkpoint's best value.
  void restore(std::vector<std::pair<std::string, double>> kept, std::optional<double> best);

 private:
  bool better(double a, double b) const { return maximise_ ? a > b : a < b; }
  /// The kept entry a new one must beat (the worst; the earliest of equal ones).
  std::size_t worst() const;

  int64_t save_top_k_;
  bool maximise_;
  std::vector<std::pair<std::string, double>> kept_;
};

}  // namespace oml::pipelines
