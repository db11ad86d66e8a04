#pragma once
// The extractor interface: a module mapping a batch of images to one embedding per image.

#include <torch/nn/module.h>

#include <cstdint>

namespace oml::models {

/// Contract for every extractor (built-in or plugin):
/// - `forward(images)` takes float images [B, C, H, W] and returns embeddings [B, feat_dim()];
///   it must work for B = 1 and in both train() and eval() mode.
/// - `feat_dim()` is fixed at construction; pipelines size losses (e.g. ArcFace) from it.
/// - Parameters and buffers are registered under stable names: checkpoints store them by name,
///   so renaming one breaks loading of old checkpoints.
/// - `on_epoch_start(epoch)` is called by training pipelines before each epoch (0-based); models
///   that freeze parts of themselves for the first epochs do it there. Default: nothing.
class Extractor : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  virtual int64_t feat_dim() const = 0;
  virtual void on_epoch_start(int64_t epoch) {}
};

/// Divides each row by its L2 norm, treating the norm as a constant for autograd (OML's
/// behaviour: the gradient is not projected onto the sphere's tangent space).
torch::Tensor normalise_detached(const torch::Tensor& features);

/// Generalised-mean pooling over H and W: (mean(x.clamp(eps)^p))^(1/p); p = 1 is average
/// pooling, large p approaches max pooling.
torch::Tensor gem_pool(const torch::Tensor& x, double p, double eps = 1e-6);

}  // namespace oml::models
