#pragma once
// ECAPA-TDNN as OML's ECAPATDNNExtractor wraps it (oml/models/audio/ecapa_tdnn/extractor.py and
// external/model.py at release 4.0.0, TaoRuijie's speaker-verification network): a waveform at
// 16 kHz in, a 192-d speaker embedding out. Parameters and buffers carry the network's names at
// the module's top level (`conv1.weight`, `layer1.convs.3.weight`, `layer2.se.se.1.bias`,
// `attention.2.running_mean`, `fc6.weight`, `bn6.running_var`, and the front end's buffers
// `torchfbank.0.flipped_filter`, `torchfbank.1.spectrogram.window`, `torchfbank.1.mel_scale.fb`),
// so that OML's state dicts (`model.` before each name) and TaoRuijie's published file
// (`speaker_encoder.` before each, plus `speaker_loss.weight`) load as they are
// (docs/models.md#ecapa_tdnn).
//
//   auto model = ECAPATDNN(ECAPATDNNOptions{.arch = "ecapa_tdnn_taoruijie", .weights = "ecapa.pth"});
//   at::Tensor embeddings = model->forward(waves);   // [B, N] float at 16 kHz -> [B, 192]
//
// Forward, as OML's (which always calls the network with aug=False, so SpecAugment never runs):
// without gradient, pre-emphasis, the mel spectrogram (oml/models/mel_spectrogram.h), log and mean
// removal over time; then conv1 (k5) - ReLU - BN, three SE-Res2Net blocks (dilation 2, 3, 4; each
// takes the sum of the stem and the earlier blocks' outputs), layer4 (1x1 conv of the three
// blocks' outputs) - ReLU, attentive statistics pooling (weighted mean and standard deviation,
// the attention seeing each frame with the utterance's mean and std), bn5, fc6, bn6.

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "oml/models/audio_input.h"
#include "oml/models/extractor.h"
#include "oml/models/mel_spectrogram.h"

namespace oml::models {

/// `extractor: {name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie, weights: null}}` (OML's
/// configs/extractor/ecapa_tdnn.yaml).
struct ECAPATDNNOptions {
  std::string arch = "ecapa_tdnn_taoruijie";  ///< required in the config, as in OML; the only arch
  std::string weights;                        ///< a file, a zoo name, or "" for random weights
  bool normalise_features = false;            ///< divide embeddings by their (detached) L2 norm
};

/// config::ArgumentError for an unknown arch or a zoo name for another extractor; reads no file.
void check_options(const ECAPATDNNOptions& options);

/// ecapa_tdnn_taoruijie.
const std::vector<std::string>& ecapa_tdnn_arch_names();

/// The sample rate the network's front end assumes (its mel filterbank is for 16 kHz): the audio
/// dataset's `sample_rate` must be this for the embeddings to mean anything.
inline constexpr int64_t kEcapaSampleRate = 16000;

/// Squeeze-excitation over channels: mean over time, 1x1 conv to 128, ReLU, 1x1 conv back,
/// sigmoid, scaling the input. Its convolutions are `se.1`, `se.3` (a Sequential named `se`).
class EcapaSEImpl : public torch::nn::Module {
 public:
  explicit EcapaSEImpl(int64_t channels, int64_t bottleneck = 128);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Sequential se_{nullptr};
};
TORCH_MODULE(EcapaSE);

/// Res2Net bottleneck with SE (TaoRuijie's Bottle2neck): conv1 (1x1) - ReLU - bn1, split into 8
/// groups of width C/8; groups 0..6 each go through a dilated conv (`convs.i`) - ReLU - `bns.i`,
/// each after adding the previous group's output, group 7 passes unchanged; conv3 (1x1) - ReLU -
/// bn3, SE, plus the input.
class EcapaBottle2neckImpl : public torch::nn::Module {
 public:
  EcapaBottle2neckImpl(int64_t inplanes, int64_t planes, int64_t kernel_size, int64_t dilation,
                       int64_t scale = 8);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t width_;
  int64_t nums_;
  torch::nn::Conv1d conv1_{nullptr}, conv3_{nullptr};
  torch::nn::BatchNorm1d bn1_{nullptr}, bn3_{nullptr};
  torch::nn::ModuleList convs_{nullptr}, bns_{nullptr};
  EcapaSE se_{nullptr};
};
TORCH_MODULE(EcapaBottle2neck);

class ECAPATDNNImpl : public Extractor, public OmlWeightsReader, public AudioInputSource {
 public:
  explicit ECAPATDNNImpl(ECAPATDNNOptions options);

  /// `waves` [B, N] or [B, 1, N], float, sampled at 16 kHz -> [B, 192], normalised as configured.
  /// DataError for another shape or for N <= 256 (the centred STFT frames need more). In training
  /// BatchNorm needs B > 1.
  torch::Tensor forward(torch::Tensor waves) override;
  int64_t feat_dim() const override { return fc6_->options.out_features(); }
  ExtractorInput input() const override { return ExtractorInput::audio; }
  std::string oml_module_attribute() const override { return "model"; }  // ECAPATDNNExtractor.model
  int64_t sample_rate() const override { return kEcapaSampleRate; }

  /// Loads `weights` (a file or the zoo name ecapa_tdnn_taoruijie) as OML's ECAPATDNNExtractor
  /// does: the dict itself or its `state_dict` entry, without `criterion.weight` and
  /// `speaker_loss.weight`, the network found by its `layer1.conv1.bias` (prefix `model.`,
  /// `speaker_encoder.`, `model.model.` in OML's .ckpt, ...); strict. DataError naming the file.
  void load_weights(const std::string& weights) override;

  /// The front end's features of `waves` [B, N]: ECAPA's log-mel [B, 80, 1 + N / 160], from the
  /// module's own buffers.
  torch::Tensor features(const torch::Tensor& waves) const;

  const ECAPATDNNOptions& options() const { return options_; }

 private:
  ECAPATDNNOptions options_;
  MelSpectrogramOptions mel_;
  torch::Tensor flipped_filter_, window_, fb_;
  torch::nn::Conv1d conv1_{nullptr}, layer4_{nullptr};
  torch::nn::BatchNorm1d bn1_{nullptr}, bn5_{nullptr}, bn6_{nullptr};
  EcapaBottle2neck layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr};
  torch::nn::Sequential attention_{nullptr};
  torch::nn::Linear fc6_{nullptr};
};
TORCH_MODULE(ECAPATDNN);

}  // namespace oml::models
