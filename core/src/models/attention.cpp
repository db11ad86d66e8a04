#include "attention.h"

#include <torch/torch.h>

#include "oml/common/cpu_features.h"
#include "torch_compat.h"

namespace oml::models::detail {
namespace {

// attend by the rule of cpu_attention on the CPU, the fused kernel elsewhere.
torch::Tensor attend_by_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& key_mask, double dropout_p) {
  const bool backward =
      torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const auto how =
      q.device().is_cpu() ? cpu_attention(q.scalar_type(), k.size(-2), backward) : CpuAttention::kFused;
  return attend(q, k, v, key_mask, dropout_p, how);
}

}  // namespace

CpuAttention cpu_attention(c10::ScalarType dtype, int64_t keys, bool backward, int64_t written_out_max_keys) {
  const bool reduced = dtype == torch::kBFloat16 || dtype == torch::kHalf;
  if (!reduced || !torch_compat::has_fused_attention) return CpuAttention::kFused;
  const bool packs = torch_compat::cpu_flash_attention_packs(dtype);
  // Half is never written out: that would run half GEMMs, measured nowhere. Where the kernel
  // packs bfloat16, only its backward pass is slow.
  if (dtype == torch::kBFloat16 && keys <= written_out_max_keys && (backward || !packs)) {
    return CpuAttention::kWrittenOut;
  }
  return packs ? CpuAttention::kFused : CpuAttention::kFusedInFloat;
}

int64_t written_out_max_keys(bool bf16_dot_products, bool amx, bool amd) {
  if (!bf16_dot_products) return 0;
  if (amx) return kWrittenOutMaxKeysAmx;
  return amd ? kWrittenOutMaxKeysAmd : kWrittenOutMaxKeysIntel;
}

CpuAttention cpu_attention(c10::ScalarType dtype, int64_t keys, bool backward) {
  static const int64_t max_keys =
      written_out_max_keys(cpu_has_bf16_dot_products(), cpu_has_amx_bf16(), cpu_is_amd());
  return cpu_attention(dtype, keys, backward, max_keys);
}

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& key_mask, double dropout_p, CpuAttention how) {
  switch (how) {
    case CpuAttention::kFused:
      return torch_compat::scaled_dot_product_attention(q, k, v, key_mask, dropout_p);
    case CpuAttention::kWrittenOut:
      return torch_compat::written_out_attention(q, k, v, key_mask, dropout_p);
    case CpuAttention::kFusedInFloat:
      break;
  }
  const auto dtype = q.scalar_type();
  // Autocast would cast the inputs back to its dtype (attention is on its lower-precision list).
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  return torch_compat::scaled_dot_product_attention(q.to(torch::kFloat), k.to(torch::kFloat),
                                                    v.to(torch::kFloat), key_mask, dropout_p)
      .to(dtype);
}

torch::Tensor self_attention(const torch::Tensor& x, const torch::Tensor& in_weight,
                             const torch::Tensor& in_bias, const torch::Tensor& out_weight,
                             const torch::Tensor& out_bias, int64_t num_heads) {
  const int64_t batch = x.size(0), tokens = x.size(1), dim = x.size(2);
  const bool fused =
      !torch::GradMode::is_enabled() && !torch_compat::autocast_enabled(c10::DeviceType::CUDA) &&
      !torch_compat::autocast_enabled(c10::DeviceType::CPU) && x.scalar_type() == in_weight.scalar_type();
  if (fused) {
    const auto bias = in_bias.defined() ? in_bias : torch::zeros({3 * dim}, in_weight.options());
    return std::get<0>(at::_native_multi_head_attention(x, x, x, dim, num_heads, in_weight, bias, out_weight,
                                                        out_bias, {}, /*need_weights=*/false));
  }
  const int64_t head_dim = dim / num_heads;
  // [B, N, 3, heads, head_dim] -> [3, B, heads, N, head_dim]
  // at::linear: one addmm for the [B, N, D] input (oml/models/dense.h says why).
  const auto qkv = at::linear(x, in_weight, in_bias)
                       .reshape({batch, tokens, 3, num_heads, head_dim})
                       .permute({2, 0, 3, 1, 4});
  // unbind, not qkv[0], qkv[1], qkv[2]: each select's backward would zero a tensor of qkv's
  // whole size and add its third into it; unbind's backward stacks the three gradients once.
  const auto q_k_v = qkv.unbind(0);
  // ATen's fused attention (flash / memory-efficient kernels on CUDA, the flash kernel on the
  // CPU), as timm's `fused_attn` ViTs train: the [B, heads, N, N] weights are never stored for
  // the backward pass. Written out as matmul, softmax, matmul where cpu_attention says so (short
  // bf16 sequences on CPUs with AVX512-BF16) and on 1.13.
  const auto out = attend_by_rule(q_k_v[0], q_k_v[1], q_k_v[2], torch::Tensor(), 0.0)
                       .transpose(1, 2)
                       .reshape({batch, tokens, dim});
  return at::linear(out, out_weight, out_bias);
}

torch::Tensor masked_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_mask, int64_t num_heads, double dropout_p) {
  const int64_t batch = q.size(0), tokens = q.size(1), dim = q.size(2);
  const int64_t head_dim = dim / num_heads;
  // [B, N, dim] -> [B, heads, N, head_dim]
  auto heads = [&](const torch::Tensor& x) {
    return x.view({batch, tokens, num_heads, head_dim}).transpose(1, 2);
  };
  // [B, N] -> [B, 1, 1, N]: one row of keys, the same for every head and query.
  const auto mask = key_mask.defined() ? key_mask.ne(0).view({batch, 1, 1, tokens}) : torch::Tensor();
  const auto out = attend_by_rule(heads(q), heads(k), heads(v), mask, dropout_p);
  return out.transpose(1, 2).reshape({batch, tokens, dim});
}

}  // namespace oml::models::detail
