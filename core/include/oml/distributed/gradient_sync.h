#pragma once
// Data-parallel gradient averaging (the "DDP" of oml-cpp; docs/ddp.md#what-happens-in-a-run).
//
//   GradientSync sync(group, named_trainable_parameters(*model, "model."), {/*bucket_mb=*/25});
//   sync.add_parameters(named_trainable_parameters(*criterion, "criterion."));  // ArcFace weights
//   sync.broadcast_from_rank0(buffers);             // once, before the first step
//   for (...) { loss.backward(); sync.finish(); optimizer.step(); }
//
// How it works: parameters are grouped, in reverse registration order (the order backward
// produces their gradients), into flat buckets of about `bucket_mb`. A hook on each parameter
// copies its gradient into its bucket during backward; when a bucket is complete it is
// all-reduced asynchronously while backward continues. Buckets are launched in index order on
// every rank, so ranks never pair different buckets.
//
// Contract:
//  - Every rank registers the same parameters (names, shapes, dtypes) in the same order;
//    the constructor checks it and throws DistributedError naming the first difference.
//  - After `finish()`, each parameter's `.grad` = its value before this backward + the mean
//    over ranks of this backward's gradient. Ranks that produced no gradient for a parameter
//    contribute zeros; a parameter that got no gradient on any rank keeps its `.grad`
//    untouched (undefined stays undefined), exactly as in a single process.
//  - Call `finish()` after every backward, on every rank (it is collective). A backward
//    without `finish()` leaves the gradients local and the next finish() throws InternalError.
//  - With world size 1 no hook is installed and `finish()` does nothing.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}  // namespace at
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace oml::distributed {

class ProcessGroup;

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// The parameters of `module` that require a gradient, with `prefix` in front of their names.
NamedTensors named_trainable_parameters(const torch::nn::Module& module, const std::string& prefix = "");
/// Every parameter and buffer of `module` (for the start-up broadcast and parameter checks).
NamedTensors named_state(const torch::nn::Module& module, const std::string& prefix = "");

/// Copies rank 0's values of `tensors` into every rank's (in place, flattened per dtype to few
/// collectives). Checks names, shapes and dtypes agree first.
void broadcast_from_rank0(ProcessGroup& group, const NamedTensors& tensors);

/// Throws DistributedError naming the first tensor whose bytes differ between ranks (and the
/// ranks). Collective.
void check_identical_across_ranks(ProcessGroup& group, const NamedTensors& tensors);

struct GradientSyncOptions {
  double bucket_mb = 25.0;         ///< bucket capacity in MiB (ddp.bucket_mb)
  int64_t check_params_every = 0;  ///< debug: check_identical_across_ranks every N finish() calls
};

class GradientSync {
 public:
  GradientSync(std::shared_ptr<ProcessGroup> group, NamedTensors parameters,
               GradientSyncOptions options = {});
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  /// Waits for every bucket (launching those whose parameters got no gradient), averages and
  /// writes `.grad`. Collective.
  void finish();

  /// Broadcasts the registered parameters and `extra` (e.g. buffers) from rank 0.
  void broadcast_from_rank0(const NamedTensors& extra = {});

  int64_t bucket_count() const;
  int64_t steps() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the autograd hooks
};

}  // namespace oml::distributed
