#pragma once
// Optimizer factories: `optimizer: {name: adam, args: {lr: 1e-4, loss_lr: 1e-2}}`.

#include <torch/types.h>

#include <vector>

namespace oml::optim {

/// The parameters to optimise, in two groups so that a loss's own parameters (ArcFace class
/// weights) can get their own learning rate (`loss_lr`, default: `lr`).
struct OptimizerContext {
  std::vector<torch::Tensor> model_parameters;  ///< extractor / pairwise model (group 0)
  std::vector<torch::Tensor> loss_parameters;   ///< criterion (group 1, only when not empty)
};

}  // namespace oml::optim
