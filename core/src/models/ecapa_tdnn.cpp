#include "oml/models/ecapa_tdnn.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/zoo.h"

namespace oml::models {
namespace nn = torch::nn;
namespace {

// ecapa_tdnn_taoruijie() is ECAPA_TDNN(C=1024); the rest of the sizes are fixed in the network.
constexpr int64_t kChannels = 1024;
constexpr int64_t kStatChannels = 1536;  // layer4's output, pooled into mean and std
constexpr int64_t kEmbeddingSize = 192;
// The clamp under every square root of the pooling, as in the network.
constexpr double kVarianceFloor = 1e-4;

}  // namespace

const std::vector<std::string>& ecapa_tdnn_arch_names() {
  static const std::vector<std::string> names = {"ecapa_tdnn_taoruijie"};
  return names;
}

void check_options(const ECAPATDNNOptions& o) {
  const auto& names = ecapa_tdnn_arch_names();
  if (std::find(names.begin(), names.end(), o.arch) == names.end()) {
    config::fail_argument("extractor 'ecapa_tdnn'", "arch", "unknown arch '", o.arch, "'",
                          did_you_mean(o.arch, names), "; expected one of ", join(names));
  }
  check_zoo_weights(o.weights, "ecapa_tdnn", o.arch);
}

EcapaSEImpl::EcapaSEImpl(int64_t channels, int64_t bottleneck) {
  se_ = register_module("se", nn::Sequential(nn::AdaptiveAvgPool1d(1), nn::Conv1d(channels, bottleneck, 1),
                                             nn::ReLU(), nn::Conv1d(bottleneck, channels, 1), nn::Sigmoid()));
}

torch::Tensor EcapaSEImpl::forward(const torch::Tensor& x) { return x * se_->forward(x); }

EcapaBottle2neckImpl::EcapaBottle2neckImpl(int64_t inplanes, int64_t planes, int64_t kernel_size,
                                           int64_t dilation, int64_t scale)
    : width_(planes / scale), nums_(scale - 1) {
  conv1_ = register_module("conv1", nn::Conv1d(inplanes, width_ * scale, 1));
  bn1_ = register_module("bn1", nn::BatchNorm1d(width_ * scale));
  convs_ = register_module("convs", nn::ModuleList());
  bns_ = register_module("bns", nn::ModuleList());
  const int64_t padding = (kernel_size / 2) * dilation;
  for (int64_t i = 0; i < nums_; ++i) {
    convs_->push_back(
        nn::Conv1d(nn::Conv1dOptions(width_, width_, kernel_size).dilation(dilation).padding(padding)));
    bns_->push_back(nn::BatchNorm1d(width_));
  }
  conv3_ = register_module("conv3", nn::Conv1d(width_ * scale, planes, 1));
  bn3_ = register_module("bn3", nn::BatchNorm1d(planes));
  se_ = register_module("se", EcapaSE(planes));
}

torch::Tensor EcapaBottle2neckImpl::forward(const torch::Tensor& x) {
  // The network's order is conv - ReLU - BN (not conv - BN - ReLU) throughout.
  const torch::Tensor out = bn1_(torch::relu(conv1_(x)));
  const std::vector<torch::Tensor> groups = out.split(width_, 1);
  std::vector<torch::Tensor> outputs;
  torch::Tensor sp;
  for (int64_t i = 0; i < nums_; ++i) {
    sp = i == 0 ? groups[0] : sp + groups[static_cast<std::size_t>(i)];
    sp = convs_[i]->as<nn::Conv1d>()->forward(sp);
    sp = bns_[i]->as<nn::BatchNorm1d>()->forward(torch::relu(sp));
    outputs.push_back(sp);
  }
  outputs.push_back(groups[static_cast<std::size_t>(nums_)]);
  const torch::Tensor y = bn3_(torch::relu(conv3_(torch::cat(outputs, 1))));
  return se_(y) + x;
}

ECAPATDNNImpl::ECAPATDNNImpl(ECAPATDNNOptions options) : options_(std::move(options)) {
  check_options(options_);
  // torchfbank = Sequential(PreEmphasis, MelSpectrogram): only buffers, under the names
  // torchaudio's modules give them.
  auto torchfbank = register_module("torchfbank", std::make_shared<nn::Module>("Sequential"));
  auto emphasis = torchfbank->register_module("0", std::make_shared<nn::Module>("PreEmphasis"));
  flipped_filter_ = emphasis->register_buffer("flipped_filter", pre_emphasis_filter());
  auto mel = torchfbank->register_module("1", std::make_shared<nn::Module>("MelSpectrogram"));
  auto spectrogram = mel->register_module("spectrogram", std::make_shared<nn::Module>("Spectrogram"));
  window_ = spectrogram->register_buffer("window", torch::hamming_window(mel_.win_length));
  auto mel_scale = mel->register_module("mel_scale", std::make_shared<nn::Module>("MelScale"));
  fb_ = mel_scale->register_buffer(
      "fb", melscale_fbanks(mel_.n_freqs(), mel_.f_min, mel_.f_max, mel_.n_mels, mel_.sample_rate));

  conv1_ = register_module("conv1", nn::Conv1d(nn::Conv1dOptions(mel_.n_mels, kChannels, 5).padding(2)));
  bn1_ = register_module("bn1", nn::BatchNorm1d(kChannels));
  layer1_ = register_module("layer1", EcapaBottle2neck(kChannels, kChannels, 3, 2));
  layer2_ = register_module("layer2", EcapaBottle2neck(kChannels, kChannels, 3, 3));
  layer3_ = register_module("layer3", EcapaBottle2neck(kChannels, kChannels, 3, 4));
  layer4_ = register_module("layer4", nn::Conv1d(3 * kChannels, kStatChannels, 1));
  attention_ = register_module(
      "attention", nn::Sequential(nn::Conv1d(3 * kStatChannels, 256, 1), nn::ReLU(), nn::BatchNorm1d(256),
                                  nn::Tanh(), nn::Conv1d(256, kStatChannels, 1), nn::Softmax(2)));
  bn5_ = register_module("bn5", nn::BatchNorm1d(2 * kStatChannels));
  fc6_ = register_module("fc6", nn::Linear(2 * kStatChannels, kEmbeddingSize));
  bn6_ = register_module("bn6", nn::BatchNorm1d(kEmbeddingSize));

  if (!options_.weights.empty()) load_weights(options_.weights);
}

void ECAPATDNNImpl::load_weights(const std::string& weights) {
  const std::string path = resolve_weights(weights, "ecapa_tdnn", options_.arch);
  io::StateDict state = io::find_state_dict(io::read_torch_file(path), path);
  // OML's remove_criterion_in_state_dict: the loss heads of OML's pipeline and of TaoRuijie's
  // training script are not part of the extractor.
  state.erase("criterion.weight");
  state.erase("speaker_loss.weight");
  io::load_state_dict(*this, io::select_backbone(state, "layer1.conv1.bias", path), path);
}

torch::Tensor ECAPATDNNImpl::features(const torch::Tensor& waves) const {
  return ecapa_log_mel(mel_spectrogram(pre_emphasis(waves, flipped_filter_), window_, fb_, mel_));
}

torch::Tensor ECAPATDNNImpl::forward(torch::Tensor waves) {
  OML_CHECK(waves.dim() == 2 || (waves.dim() == 3 && waves.size(1) == 1), DataError,
            "ecapa_tdnn expects audio [batch, samples] or [batch, 1, samples], got ", waves.sizes());
  if (waves.dim() == 3) waves = waves.squeeze(1);
  OML_CHECK(waves.size(1) > mel_.n_fft / 2, DataError, "ecapa_tdnn: ", waves.size(1),
            " samples are too few; it needs more than ", mel_.n_fft / 2, " (", mel_.n_fft / 2 + 1,
            " samples at 16 kHz, for its centred STFT frames)");
  torch::Tensor x;
  {
    // As the network: no gradient flows into the waveform through the front end.
    torch::NoGradGuard no_grad;
    x = features(waves.to(torch::kFloat32));
  }
  x = bn1_(torch::relu(conv1_(x)));
  const torch::Tensor x1 = layer1_(x);
  const torch::Tensor x2 = layer2_(x + x1);
  const torch::Tensor x3 = layer3_(x + x1 + x2);
  x = torch::relu(layer4_(torch::cat({x1, x2, x3}, 1)));

  const int64_t t = x.size(-1);
  const torch::Tensor mean = x.mean(2, /*keepdim=*/true);
  const torch::Tensor std = x.var(2, /*unbiased=*/true, /*keepdim=*/true).clamp_min(kVarianceFloor).sqrt();
  const torch::Tensor global = torch::cat({x, mean.repeat({1, 1, t}), std.repeat({1, 1, t})}, 1);
  const torch::Tensor w = attention_->forward(global);

  const torch::Tensor mu = (x * w).sum(2);
  const torch::Tensor sg = ((x.pow(2) * w).sum(2) - mu.pow(2)).clamp_min(kVarianceFloor).sqrt();
  torch::Tensor out = bn6_(fc6_(bn5_(torch::cat({mu, sg}, 1))));
  return options_.normalise_features ? normalise_detached(out) : out;
}

}  // namespace oml::models
