#pragma once
// Multi-head self-attention over packed input projections, shared by the vision transformers:
// DINO's `attn.qkv` and torch.nn.MultiheadAttention's `in_proj_weight` (CLIP) lay them out the
// same way, as the rows [q; k; v] of a [3 * dim, dim] matrix. Private to oml_core (core/src).

#include <torch/types.h>

namespace oml::models::detail {

/// Self-attention of `x` [B, N, dim] (batch first) with `num_heads` heads: softmax(q k^T /
/// sqrt(dim / num_heads)) v through the output projection; [B, N, dim]. `in_bias` may be undefined
/// (projections without bias, as UNICOM's). Without autograd and
/// autocast it runs ATen's fused kernel (projections, scores, softmax and weighted sum in one
/// call; it has no backward and no autocast rule), otherwise differentiable matmuls.
torch::Tensor self_attention(const torch::Tensor& x, const torch::Tensor& in_weight,
                             const torch::Tensor& in_bias, const torch::Tensor& out_weight,
                             const torch::Tensor& out_bias, int64_t num_heads);

}  // namespace oml::models::detail
