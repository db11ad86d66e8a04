#pragma once
// The extractor interface: a module mapping a batch of images (or of tokenised texts, or of
// waveforms) to one embedding per item.

#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace oml::models {

/// Which epochs a backbone is frozen in: the first `epochs` ones, or every one (`whole_run`).
struct BackboneFreezing {
  int64_t epochs = 0;
  bool whole_run = false;

  bool frozen_in(int64_t epoch) const { return whole_run || epoch < epochs; }
  bool any() const { return whole_run || epochs > 0; }
};

/// What an extractor's forward() takes (Extractor::input()).
enum class ExtractorInput {
  images,  ///< float images [B, C, H, W]
  tokens,  ///< a tokenizer's output packed into one int64 tensor [B, 2 or 3, L] (oml/models/token_batch.h)
  audio,   ///< float waveforms [B, 1, N] or [B, N] at the extractor's sample rate (oml/data/audio_dataset.h)
};

/// Contract for every extractor (built-in or plugin):
/// - `forward(inputs)` takes a batch of what `input()` says — float images [B, C, H, W] (every
///   extractor unless it says otherwise), packed tokens [B, 2 | 3, L] (text extractors: the
///   input ids, the attention mask and optionally the token type ids, one row each), or
///   waveforms [B, 1, N] (audio extractors, as an AudioDataset collates them) — and
///   returns embeddings [B, feat_dim()]. One tensor either way, so that batches move through the
///   loader, the devices, DDP and serving unchanged. It must work for B = 1 and in both train()
///   and eval() mode.
/// - `feat_dim()` is fixed at construction; pipelines size losses (e.g. ArcFace) from it.
/// - Parameters and buffers are registered under stable names: checkpoints store them by name,
///   so renaming one breaks loading of old checkpoints.
/// - Freezing: an extractor with a separate backbone (one that can be trained or held fixed
///   while the rest trains) says so with `freezable()`, implements `set_backbone_frozen()` and
///   reports the freezing its own args ask for with `requested_freezing()`. The training
///   pipeline owns the schedule (it merges these args with the top-level `freeze_n_epochs`) and
///   calls `set_backbone_frozen()` at the start of every epoch, after `train()`; the model owns
///   the state: a frozen backbone gets no gradient and stays in eval mode until unfrozen.
class Extractor : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  virtual int64_t feat_dim() const = 0;
  virtual ExtractorInput input() const { return ExtractorInput::images; }

  virtual bool freezable() const { return false; }
  /// Only called when freezable(); the default throws InternalError.
  virtual void set_backbone_frozen(bool frozen);
  virtual BackboneFreezing requested_freezing() const { return {}; }
  /// The attribute OML's Python class for this extractor keeps its network in (`model` for
  /// ViTExtractor and ResnetExtractor, whose own state dicts therefore read `model.*`); "" when
  /// there is no such class. Wrappers that nest this extractor under a name (extractor_with_mlp)
  /// put it below this attribute too, so that their state dicts are OML's, both ways.
  virtual std::string oml_module_attribute() const { return ""; }
};

/// An extractor that reads weights files the way its OML class does (zoo names, OML's .ckpt
/// prefixes, the published formats of its family) implements this too: the top-level `weights:`
/// of oml-validate and oml-predict then goes through load_weights() instead of the generic strict
/// state-dict loader (oml/io/state_dict.h). Errors are DataErrors naming the file.
class OmlWeightsReader {
 public:
  virtual ~OmlWeightsReader() = default;
  virtual void load_weights(const std::string& weights) = 0;
};

/// Divides each row by its L2 norm, treating the norm as a constant for autograd (OML's
/// behaviour: the gradient is not projected onto the sphere's tangent space).
torch::Tensor normalise_detached(const torch::Tensor& features);

/// Generalised-mean pooling over H and W: (mean(x.clamp(eps)^p))^(1/p); p = 1 is average
/// pooling, large p approaches max pooling.
torch::Tensor gem_pool(const torch::Tensor& x, double p, double eps = 1e-6);

}  // namespace oml::models
