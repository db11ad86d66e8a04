#include "oml/models/memory_format.h"

#include <torch/nn/module.h>
#include <torch/utils.h>

namespace oml::models {
namespace {

bool laid_out(const at::Tensor& t, at::MemoryFormat format) {
  return t.dim() != 4 || t.is_contiguous(format);
}

// `t`'s data in `format`, in place of its old storage (the tensor object, which optimizers and
// hooks hold, stays the same).
void relayout(at::Tensor& t, at::MemoryFormat format) {
  if (laid_out(t, format)) return;
  t.set_data(t.data().contiguous(format));
}

}  // namespace

void set_memory_format(torch::nn::Module& module, at::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : module.parameters(/*recurse=*/true)) {
    relayout(p, format);
    if (p.grad().defined()) relayout(p.mutable_grad(), format);
  }
  for (at::Tensor& b : module.buffers(/*recurse=*/true)) relayout(b, format);
}

bool has_memory_format(const torch::nn::Module& module, at::MemoryFormat format) {
  for (const at::Tensor& p : module.parameters(/*recurse=*/true)) {
    if (!laid_out(p, format)) return false;
  }
  return true;
}

}  // namespace oml::models
