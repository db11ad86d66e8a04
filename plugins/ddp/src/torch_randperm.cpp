// The only translation unit of the DDP plugin that includes ATen (slow to compile).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randperm.h>

#include "oml/ddp/ddp_sampler_wrapper.h"

namespace oml::ddp {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  // Same generator (mt19937 seeded by manual_seed) and same randperm kernel as PyTorch's CPU
  // path, so the permutation equals torch.utils.data.DistributedSampler's.
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const at::Tensor perm = at::randperm(n, generator, at::TensorOptions().dtype(at::kLong));
  const int64_t* data = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

}  // namespace oml::ddp
