#pragma once
// A loss over the whole step's batch under DDP: `ddp.gather_embeddings_for_loss: true`
// (docs/ddp.md#a-loss-over-every-ranks-batch), as pytorch-metric-learning's
// DistributedLossWrapper (efficient=False) does.
//
//   auto out = loss_over_all_ranks(*criterion, *group, embeddings, labels);  // in hooks.step
//   out.loss.backward();  // then the GradientSync averages the gradients as usual
//
// Every rank gathers every rank's embeddings and labels in rank order and computes the loss over
// all of them: miners mine the global batch, every gathered row is an anchor on every rank, so
// every rank computes the same loss, the loss of one process whose batch is the ranks' batches
// concatenated in rank order. The rows of the other ranks are detached copies; the gradient
// reaches this rank's own rows only, multiplied by the world size W. Why W, and only there:
//   - a row's gradient in one process is the sum of its terms in the loss; here only its own
//     rank computes it (the other ranks' copies of the row are detached), once;
//   - the GradientSync averages over the ranks, i.e. divides the summed gradients by W; the W on
//     the rows cancels that, so the extractor's gradients equal one process's;
//   - a loss's own parameters (proxies, class weights) see every row on every rank, so each rank
//     already holds one process's full gradient for them; they are not multiplied, and the
//     average of W equal gradients is that gradient.
// PML's wrapper multiplies the whole loss by W instead, which scales the gradients of a loss's
// own parameters by W as well; here they equal one process's.
// The returned loss's value is the global loss itself (not W times it), the same on every rank.

#include "oml/losses/criterion.h"

namespace oml::distributed {
class ProcessGroup;
}  // namespace oml::distributed

namespace oml::losses {

/// Every rank's embeddings and labels of a step, concatenated in rank order.
struct GatheredBatch {
  /// [N, D], N the rows of all ranks; float32 when the local embeddings are 16-bit (autocast),
  /// else their dtype. Rows [begin, end) are this rank's, differentiable (their gradient
  /// multiplied by `gradient_scale`); the others are detached.
  torch::Tensor embeddings;
  torch::Tensor labels;  ///< [N] int64
  int64_t begin = 0, end = 0;
};

/// Gathers `embeddings` [B, D] and `labels` [B] of every rank of `group` (B may differ between
/// ranks, 0 included; D and the dtype may not: DistributedError naming the ranks). This rank's
/// rows keep their autograd history, their gradient multiplied by `gradient_scale`. Collective:
/// every rank must call it in the same step. One rank: the input, unchanged but for the dtype.
GatheredBatch gather_batch(distributed::ProcessGroup& group, const torch::Tensor& embeddings,
                           const torch::Tensor& labels, double gradient_scale = 1.0);

/// `criterion` over the gathered batch of every rank, with the gradient of this rank's rows
/// multiplied by the world size (the header says why). With one rank: criterion.forward(embeddings,
/// labels) itself. Collective.
LossOutput loss_over_all_ranks(Criterion& criterion, distributed::ProcessGroup& group,
                               const torch::Tensor& embeddings, const torch::Tensor& labels);

}  // namespace oml::losses
