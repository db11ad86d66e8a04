#pragma once
// Multi-head self-attention: over packed input projections for the vision transformers (DINO's
// `attn.qkv` and torch.nn.MultiheadAttention's `in_proj_weight` (CLIP) lay them out the same way,
// as the rows [q; k; v] of a [3 * dim, dim] matrix), and with a padding mask for the text
// encoders. Private to oml_core (core/src).

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

/// Multi-head attention over projected queries, keys and values [B, N, dim] (the text encoders'
/// separate query / key / value layers), before the output projection: [B, N, dim]. `key_mask`
/// is the attention mask as transformers takes it, [B, N] with nonzero for tokens and 0 for
/// padding, or undefined (no padding). Runs torch_compat::scaled_dot_product_attention, with
/// the attention weights dropped with probability `dropout_p` (pass 0 outside training).
torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_mask, int64_t num_heads, double dropout_p);

}  // namespace oml::models::detail
