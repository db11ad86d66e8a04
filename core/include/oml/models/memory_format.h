#pragma once
// The memory layout of a model's convolution weights (docs/training.md#memory-format).
//
// A convolution whose weight is channels_last (NHWC) runs in channels_last, in cuDNN as in
// oneDNN, and hands channels_last activations to the next layer; batch norm, ReLU and pooling
// keep the layout they are given. So laying out a model's 4-d weights is all PyTorch's
// `model.to(memory_format=torch.channels_last)` does, and all it takes: an NCHW input batch is
// converted once, by the first convolution. Gradients follow their parameter's strides
// (autograd's layout contract), and so do optimizer states made with zeros_like.

#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace oml::models {

/// Lays out every 4-d parameter and buffer of `module` (and of its submodules) in `format`
/// (at::MemoryFormat::Contiguous or ChannelsLast): the values stay, the strides change, and a
/// parameter's gradient, when it has one, follows. Other tensors are left as they are.
void set_memory_format(torch::nn::Module& module, at::MemoryFormat format);

/// Whether every 4-d parameter of `module` is laid out in `format`.
bool has_memory_format(const torch::nn::Module& module, at::MemoryFormat format);

}  // namespace oml::models
