#pragma once
// Data-parallel gradient averaging (the "DDP" of oml-cpp; docs/ddp.md#what-happens-in-a-run).
//
//   NamedTensors params = named_trainable_parameters(*model, "model.");
//   for (auto& p : named_trainable_parameters(*criterion, "criterion.")) params.push_back(p);  // ArcFace
//   GradientSync sync(group, std::move(params), {/*bucket_mb=*/25});
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
//  - Gradient accumulation (accumulate_grad_batches), as PyTorch DDP's no_sync(): between
//    `accumulate_locally(true)` and `accumulate_locally(false)` backward adds its gradients to
//    `.grad` on this rank only, as in a single process, and finish() is not called. The first
//    backward after `accumulate_locally(false)` sends each parameter's local sum together with
//    its own gradient, so after its finish() `.grad` = the mean over ranks of everything
//    accumulated: one all-reduce per optimizer step.
//  - With `compression` bf16 or fp16 (ddp.gradient_compression), float32 buckets travel in the
//    16-bit type (all_reduce_mean below): the mean is then within two roundings to that type of
//    the exact one, and identical on every rank. The collectives run on one communication
//    thread of the GradientSync, bucket after bucket in launch order, so backward still
//    overlaps them; the destructor joins it (bounded by the group's timeout).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oml/distributed/gradient_compression.h"

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

/// Replaces `tensor` (contiguous, on the group's device) with its mean over the ranks of
/// `group`. Collective, blocking. With `none` (or a tensor that is not float32) it is one sum
/// all-reduce. With bf16/fp16 the bytes on the wire are 16-bit, as a ring all-reduce's
/// (2 (W-1)/W of the tensor's 16-bit size sent per rank): each rank rounds tensor / W to the
/// type once, an all-to-all gives every rank one block of all ranks' values, which it sums in
/// float32 in rank order and rounds once more, and an all-gather of those blocks completes the
/// mean. (Gloo's all-reduce has no bfloat16 sum, and summing in float32 rounds less than a
/// 16-bit ring.)
/// (The tensor is exchanged in pieces of this many elements, a few in flight at once.)
void all_reduce_mean(ProcessGroup& group, at::Tensor& tensor, GradientCompression compression);
inline constexpr int64_t kCompressedPieceElements = int64_t{1} << 20;

struct GradientSyncOptions {
  double bucket_mb = 25.0;         ///< bucket capacity in MiB (ddp.bucket_mb)
  int64_t check_params_every = 0;  ///< debug: check_identical_across_ranks every N finish() calls
  GradientCompression compression = GradientCompression::none;  ///< ddp.gradient_compression
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

  /// Switches local accumulation on (backward keeps its gradients on this rank) or off (the next
  /// backward's finish() averages them with everything accumulated since). See the contract.
  void accumulate_locally(bool local);

  /// Broadcasts the registered parameters and `extra` (e.g. buffers) from rank 0.
  void broadcast_from_rank0(const NamedTensors& extra = {});

  int64_t bucket_count() const;
  /// Elements per bucket, in launch order (each is one all_reduce_mean per step).
  std::vector<int64_t> bucket_numels() const;
  int64_t steps() const;
  /// Seconds finish() spent waiting for bucket collectives, summed over its calls: the part of
  /// the communication that backward did not hide.
  double wait_seconds() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the autograd hooks
};

}  // namespace oml::distributed
