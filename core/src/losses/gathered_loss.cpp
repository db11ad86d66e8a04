#include "oml/losses/gathered_loss.h"

#include <torch/torch.h>

#include <vector>

#include "oml/common/error.h"
#include "oml/distributed/process_group.h"

namespace oml::losses {

namespace {

// The identity whose backward multiplies the gradient by `factor`: this rank's rows stand for
// the W - 1 detached copies of them the other ranks hold (gathered_loss.h).
struct ScaleGradient : torch::autograd::Function<ScaleGradient> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double factor) {
    ctx->saved_data["factor"] = factor;
    return x.clone();
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return {grads[0] * ctx->saved_data["factor"].toDouble(), torch::Tensor()};
  }
};

}  // namespace

GatheredBatch gather_batch(distributed::ProcessGroup& group, const torch::Tensor& embeddings,
                           const torch::Tensor& labels, double gradient_scale) {
  OML_CHECK(embeddings.dim() == 2, DataError,
            "ddp.gather_embeddings_for_loss: expected embeddings [B, D], got ", embeddings.sizes());
  OML_CHECK(labels.dim() == 1 && labels.size(0) == embeddings.size(0), DataError,
            "ddp.gather_embeddings_for_loss: expected labels [", embeddings.size(0), "], got ",
            labels.sizes());
  OML_CHECK(!labels.is_floating_point(), DataError,
            "ddp.gather_embeddings_for_loss: labels must be integers, got ", labels.scalar_type());
  // 16-bit embeddings (autocast) travel and are gathered as float32, which every built-in loss
  // computes in anyway (float32_input): Gloo of LibTorch 1.13 cannot move bfloat16, and the
  // loss sees the values one process's loss would.
  torch::Tensor local = float32_input(embeddings);
  if (gradient_scale != 1.0 && local.requires_grad()) local = ScaleGradient::apply(local, gradient_scale);
  const torch::Tensor local_labels = labels.to(torch::kLong);
  GatheredBatch out;
  out.end = local.size(0);
  if (group.size() == 1) {
    out.embeddings = local;
    out.labels = local_labels;
    return out;
  }
  const std::vector<torch::Tensor> rows = group.all_gather(local.detach());
  out.labels = group.all_gather_concat(local_labels);
  std::vector<torch::Tensor> parts;
  parts.reserve(rows.size());
  for (int r = 0; r < group.size(); ++r) {
    if (r < group.rank()) out.begin += rows[r].size(0);
    // Only this rank's rows carry autograd history; the received copies are leaves without it.
    parts.push_back(r == group.rank() ? local : rows[r]);
  }
  out.end = out.begin + local.size(0);
  out.embeddings = torch::cat(parts, 0);
  return out;
}

LossOutput loss_over_all_ranks(Criterion& criterion, distributed::ProcessGroup& group,
                               const torch::Tensor& embeddings, const torch::Tensor& labels) {
  if (group.size() == 1) return criterion.forward(embeddings, labels);
  const GatheredBatch all = gather_batch(group, embeddings, labels, static_cast<double>(group.size()));
  return criterion.forward(all.embeddings, all.labels);
}

}  // namespace oml::losses
