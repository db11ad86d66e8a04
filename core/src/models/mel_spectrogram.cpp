#include "oml/models/mel_spectrogram.h"

#include <torch/torch.h>

#include <cmath>

#include "oml/common/error.h"

namespace oml::models {

at::Tensor melscale_fbanks(int64_t n_freqs, double f_min, double f_max, int64_t n_mels, int64_t sample_rate) {
  OML_CHECK(n_freqs >= 2 && n_mels >= 1 && sample_rate > 0 && 0 <= f_min && f_min < f_max, UsageError,
            "melscale_fbanks: got n_freqs ", n_freqs, ", n_mels ", n_mels, ", sample_rate ", sample_rate,
            ", f_min ", f_min, ", f_max ", f_max);
  const auto hz_to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };  // in double
  // torchaudio's linspaces are float32 (the default dtype), and so is the rest of its arithmetic.
  const at::Tensor all_freqs =
      torch::linspace(0.0, static_cast<double>(sample_rate / 2), n_freqs, torch::kFloat32);
  const at::Tensor m_pts = torch::linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2, torch::kFloat32);
  const at::Tensor f_pts = 700.0 * (torch::pow(10.0, m_pts / 2595.0) - 1.0);
  const at::Tensor f_diff = f_pts.slice(0, 1) - f_pts.slice(0, 0, -1);
  const at::Tensor slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1);
  const at::Tensor down = (-1.0 * slopes.slice(1, 0, -2)) / f_diff.slice(0, 0, -1);
  const at::Tensor up = slopes.slice(1, 2) / f_diff.slice(0, 1);
  return torch::max(torch::zeros({1}), torch::min(down, up));
}

at::Tensor pre_emphasis_filter(double coef) {
  return torch::tensor({static_cast<float>(-coef), 1.0F}, torch::kFloat32).view({1, 1, 2});
}

at::Tensor pre_emphasis(const at::Tensor& waveform, const at::Tensor& flipped_filter) {
  OML_CHECK(waveform.dim() == 2 && waveform.size(1) >= 2, UsageError,
            "pre_emphasis takes a waveform [batch, samples] of at least 2 samples, got ", waveform.sizes());
  namespace F = torch::nn::functional;
  const at::Tensor padded = F::pad(waveform.unsqueeze(1), F::PadFuncOptions({1, 0}).mode(torch::kReflect));
  return torch::conv1d(padded, flipped_filter).squeeze(1);
}

at::Tensor mel_spectrogram(const at::Tensor& waveform, const at::Tensor& window, const at::Tensor& fb,
                           const MelSpectrogramOptions& options) {
  OML_CHECK(waveform.dim() == 2, UsageError, "mel_spectrogram takes a waveform [batch, samples], got ",
            waveform.sizes());
  OML_CHECK(waveform.size(1) > options.n_fft / 2, UsageError, "mel_spectrogram: a waveform of ",
            waveform.size(1), " samples is too short for centred frames of n_fft ", options.n_fft,
            " (reflect padding needs more than ", options.n_fft / 2, " samples)");
  OML_CHECK(fb.dim() == 2 && fb.size(0) == options.n_freqs(), UsageError,
            "mel_spectrogram: the filterbank must be [", options.n_freqs(), ", n_mels], got ", fb.sizes());
  const at::Tensor spec = torch::stft(waveform, options.n_fft, options.hop_length, options.win_length, window,
                                      /*center=*/true, /*pad_mode=*/"reflect", /*normalized=*/false,
                                      /*onesided=*/true, /*return_complex=*/true);
  const at::Tensor power = spec.abs().pow(2.0);  // [B, n_freqs, T]
  return torch::matmul(power.transpose(-1, -2), fb).transpose(-1, -2);
}

at::Tensor ecapa_log_mel(const at::Tensor& mel) {
  const at::Tensor log_mel = (mel + 1e-6).log();
  return log_mel - log_mel.mean(-1, /*keepdim=*/true);
}

}  // namespace oml::models
