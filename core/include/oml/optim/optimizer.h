#pragma once
// Optimizers: `optimizer: {name: adam, args: {lr: 1e-4, loss_lr: 1e-2}}`.

#include <torch/types.h>

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

#include <vector>

namespace oml::optim {

/// The parameters to optimise, in two groups so that a loss's own parameters (ArcFace class
/// weights) can get their own learning rate (`loss_lr`, default: `lr`).
struct OptimizerContext {
  std::vector<torch::Tensor> model_parameters;  ///< extractor / pairwise model (group 0)
  std::vector<torch::Tensor> loss_parameters;   ///< criterion (group 1, only when not empty)
};

/// Clears every gradient before a step's backward: sets them to none, as PyTorch 2.x's
/// `optimizer.zero_grad()` does (and so on every LibTorch oml-cpp builds against): a parameter
/// that gets no gradient in a step is skipped by the optimizer instead of being updated with
/// a zero gradient (weight decay, momentum).
void zero_grad(torch::optim::Optimizer& optimizer);

}  // namespace oml::optim
