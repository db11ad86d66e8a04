#pragma once
// OML_TRACE_BATCHES=<dir>: every rank appends the rows of each training batch it runs to
// <dir>/batches.rank<R>.jsonl, one line per step, so that the data order a run trained on can be
// audited — e.g. that a run resumed on another number of ranks consumed each batch of the
// interrupted epoch once (docs/training.md#auditing-the-data-order).
//
//   auto trace = BatchTrace::from_environment(ctx.rank(), ctx.world_size());  // null: not asked for
//   if (trace) trace->record(epoch, step, batch.indices);

#include <cstdint>
#include <filesystem>
#include <memory>

#include "runtime/run_dir.h"

namespace at {
class Tensor;
}  // namespace at

namespace oml::pipelines {

class BatchTrace {
 public:
  /// The trace OML_TRACE_BATCHES asks for, or null when it is unset or empty. UsageError when the
  /// directory cannot be created or the file not opened (naming the variable and the path).
  static std::unique_ptr<BatchTrace> from_environment(int64_t rank, int64_t world);

  BatchTrace(const std::filesystem::path& dir, int64_t rank, int64_t world);

  /// {"epoch": e, "step": s, "rank": r, "world_size": W, "indices": [...]}: the batch's rows of
  /// the train split (the sampler's indices, as oml-sampler prints them), flushed at once.
  void record(int64_t epoch, int64_t step, const at::Tensor& indices);

 private:
  int64_t rank_;
  int64_t world_;
  JsonlWriter out_;
};

}  // namespace oml::pipelines
