#pragma once
// The audio front end of OML's ECAPA-TDNN (oml/models/audio/ecapa_tdnn/external/model.py,
// `torchfbank`): pre-emphasis, then torchaudio.transforms.MelSpectrogram(sample_rate=16000,
// n_fft=512, win_length=400, hop_length=160, f_min=20, f_max=7600, window_fn=hamming_window,
// n_mels=80) — a power spectrogram (|STFT|^2, centred frames, reflect padding) through HTK mel
// triangles without normalisation — and ECAPA's log with per-band mean removal.
//
//   at::Tensor fb = melscale_fbanks(257, 20, 7600, 80, 16000);            // [257, 80]
//   at::Tensor mel = mel_spectrogram(pre_emphasis(wave, kPreEmphasisFilter...), window, fb, options);
//
// The window, the filterbank and the pre-emphasis filter are parameters here (not recomputed)
// because ECAPA keeps them as buffers in its state dict: a file's copies are what the model uses.
// OML 4.0 computes no Kaldi fbank anywhere (no torchaudio.compliance.kaldi call); these are the
// features its audio extractor sees.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace oml::models {

/// torchaudio.transforms.MelSpectrogram's arguments as ECAPA sets them (power 2, center true,
/// pad_mode reflect, onesided, norm None, mel_scale htk).
struct MelSpectrogramOptions {
  int64_t sample_rate = 16000;
  int64_t n_fft = 512;
  int64_t win_length = 400;
  int64_t hop_length = 160;
  double f_min = 20.0;
  double f_max = 7600.0;
  int64_t n_mels = 80;

  int64_t n_freqs() const { return n_fft / 2 + 1; }
};

/// torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None,
/// mel_scale="htk"): triangles over HTK mel points, float32 [n_freqs, n_mels], computed in float32
/// as torchaudio does.
at::Tensor melscale_fbanks(int64_t n_freqs, double f_min, double f_max, int64_t n_mels, int64_t sample_rate);

/// ECAPA's PreEmphasis buffer: float32 [1, 1, 2] = [-coef, 1] (coef 0.97).
at::Tensor pre_emphasis_filter(double coef = 0.97);

/// y[t] = x[t] - coef * x[t - 1] by conv1d with `flipped_filter` [1, 1, 2], x[-1] taken as x[1]
/// (reflect padding): [B, N] -> [B, N]. N must be >= 2 (reflect padding needs it; UsageError).
at::Tensor pre_emphasis(const at::Tensor& waveform, const at::Tensor& flipped_filter);

/// MelSpectrogram of `waveform` [B, N] with `window` [win_length] (torch.hamming_window(400),
/// periodic) and `fb` [n_freqs, n_mels]: [B, n_mels, 1 + N / hop_length]. UsageError when the
/// waveform is shorter than n_fft / 2 + 1 samples (reflect padding needs more than the pad).
at::Tensor mel_spectrogram(const at::Tensor& waveform, const at::Tensor& window, const at::Tensor& fb,
                           const MelSpectrogramOptions& options);

/// ECAPA's features from a mel spectrogram [B, n_mels, T]: log(mel + 1e-6) minus its mean over
/// time, per band.
at::Tensor ecapa_log_mel(const at::Tensor& mel);

}  // namespace oml::models
