#include "oml/models/dense.h"

#include <ATen/ops/linear.h>

namespace oml::models {

torch::Tensor DenseImpl::forward(const torch::Tensor& input) { return at::linear(input, weight, bias); }

}  // namespace oml::models
