#pragma once
// Multi-head self-attention: over packed input projections for the vision transformers (DINO's
// `attn.qkv` and torch.nn.MultiheadAttention's `in_proj_weight` (CLIP) lay them out the same way,
// as the rows [q; k; v] of a [3 * dim, dim] matrix), and with a padding mask for the text
// encoders. Private to oml_core (core/src).

#include <torch/types.h>

#include <cstdint>

namespace oml::models::detail {

/// How attention runs on the CPU for q, k and v of one dtype (docs/benchmarks.md has the figures).
enum class CpuAttention {
  kFused,         ///< torch_compat::scaled_dot_product_attention in that dtype
  kFusedInFloat,  ///< the same in float32, the output cast back
  kWrittenOut,    ///< torch_compat::written_out_attention in that dtype
};

/// Up to how many keys bfloat16 attention is written out on the CPU (docs/benchmarks.md has the
/// per-layer figures behind each limit). With AMX, ATen's bfloat16 matmuls run on tiles and beat
/// the flash kernel in either dtype at every size measured up to 577 tokens (1.2-2.3x per layer
/// against the faster one; tied at 1370). On a CPU with AVX512-BF16 but no AMX, the flash kernel
/// cannot pack bfloat16 and is run in float32 instead: on AMD CPUs its float32 GEMMs are MKL's
/// slower code path there, and bfloat16 written out wins 1.3-2.6x up to 577 tokens (Zen 4; 1.9x at
/// 261), and its forward pass alone 1.3-2.5x up to 261 tokens; on Intel CPUs MKL's float32 GEMMs
/// are fast and written out wins up to ~100 tokens (1.3-1.5x at 50-101), ties at 145 and loses
/// from 197 (1.1-1.2x slower). Written out stores the [B, heads, N, N] weights for the backward
/// pass, memory growing with N^2 where the rest of a layer's grows with N: with AMX and on AMD,
/// 320 keys covers every zoo ViT at 224 px (ViT/14 with registers: 261 tokens) and leaves longer
/// sequences (ViT/16 at 384 px: 577, whose forward pass alone the flash kernel wins) to it.
inline constexpr int64_t kWrittenOutMaxKeysAmx = 320;
inline constexpr int64_t kWrittenOutMaxKeysAmd = 320;
inline constexpr int64_t kWrittenOutMaxKeysIntel = 128;

/// The rule, for q, k, v of `dtype` over `keys` keys on the CPU, `backward` saying whether a
/// backward pass will run through it: float32 runs the fused kernel; bfloat16 over at most
/// `written_out_max_keys` keys is written out, except without `backward` where the fused kernel
/// packs bfloat16 (AMX, LibTorch 2.5 and later: its forward pass is as fast as written out up to
/// 197 tokens and 2.8-5.4x faster beyond, its backward pass the slow part); other bfloat16 and half
/// run the fused kernel as they are where it packs them, else in float32 (without AMX its bfloat16
/// path runs generic GEMMs: 2x slower than float32 on an Intel Xeon, 3-7x on AMD Zen 3, and written
/// out 10-23x there, without AVX512-BF16). On 1.13 (no fused kernel) always kFused, which is
/// written out there.
CpuAttention cpu_attention(c10::ScalarType dtype, int64_t keys, bool backward, int64_t written_out_max_keys);

/// `written_out_max_keys` for a CPU: 0 without `bf16_dot_products`, otherwise
/// kWrittenOutMaxKeysAmx with `amx`, kWrittenOutMaxKeysAmd on another AMD CPU and
/// kWrittenOutMaxKeysIntel on the rest.
int64_t written_out_max_keys(bool bf16_dot_products, bool amx, bool amd);

/// cpu_attention for this process's CPU (oml/common/cpu_features.h).
CpuAttention cpu_attention(c10::ScalarType dtype, int64_t keys, bool backward);

/// Attention over q, k, v [B, heads, N, head_dim] (a boolean `key_mask` broadcastable to [B,
/// heads, N, N], or undefined; weights dropped with probability `dropout_p`) the way `how` says,
/// on any device; the output in q's dtype. self_attention and masked_attention pass
/// cpu_attention's choice on the CPU, kFused elsewhere.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& key_mask, double dropout_p, CpuAttention how);

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
