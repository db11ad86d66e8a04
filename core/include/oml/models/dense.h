#pragma once
// A fully connected layer whose forward is ATen's linear (at::linear), for the transformer models'
// [B, tokens, features] inputs. LibTorch's C++ nn::Linear goes through the C++ frontend's own
// F::linear, which fuses the bias into the matrix product (addmm) only for 2-D inputs: a 3-D one
// is a matmul followed by a separate bias pass, forward and backward. PyTorch's Python F.linear
// is at::linear, which flattens a contiguous 3-D input into one addmm (on CUDA, cuBLASLt adds
// the bias in the GEMM's epilogue). Dense is an nn::Linear otherwise: the same parameters and
// names, and `module->as<torch::nn::Linear>()` finds it.

#include <torch/nn/modules/linear.h>

namespace oml::models {

class DenseImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(Dense);

}  // namespace oml::models
