#include "oml/optim/optimizer.h"

#include <torch/optim/optimizer.h>

#include "torch_compat.h"

namespace oml::optim {

void zero_grad(torch::optim::Optimizer& optimizer) { torch_compat::zero_grad(optimizer); }

}  // namespace oml::optim
