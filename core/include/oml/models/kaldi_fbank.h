#pragma once
// Kaldi's filterbank features as torchaudio.compliance.kaldi.fbank computes them: the front end of
// the Kaldi-trained speaker models (WeSpeaker's ResNets, x-vectors) that users bring beside OML's
// ECAPA-TDNN, whose own front end is a MelSpectrogram (oml/models/mel_spectrogram.h). A plugin's
// audio extractor calls it on the waveforms the pipelines feed it.
//
//   KaldiFbankOptions o;                       // torchaudio's defaults: 23 bins, 25 ms / 10 ms, povey
//   o.num_mel_bins = 80;
//   at::Tensor f = kaldi_fbank(wave, o);       // [N] float at 16 kHz -> [frames, 80]
//
// Per frame (frame_length ms every frame_shift ms; with snip_edges only frames that fit, else
// 1 + N / shift frames over the signal mirrored at both ends, Kaldi's way): the frame's mean
// removed, pre-emphasis y[t] = x[t] - c x[t-1] (x[-1] = x[0]), the window, zero padding to the
// next power of two, the power (or magnitude) spectrum through triangular filters evenly spaced
// on Kaldi's mel scale (1127 ln(1 + f / 700)) from low_freq to high_freq, then the log (floored
// at float32's epsilon). Optionally the frame's log energy, and the mean over frames removed.
// Computed in the waveform's float type, as torchaudio does; equal to it to 1e-4
// (tests/core/audio_tests.cpp). Dithering and VTLN warping are not offered: both are off in
// torchaudio's defaults, and dithering adds random noise to features that are otherwise a
// function of the waveform.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace oml::models {

/// torchaudio.compliance.kaldi.fbank's arguments and defaults (dither 0, vtln_warp 1).
struct KaldiFbankOptions {
  double sample_frequency = 16000.0;
  double frame_length_ms = 25.0;
  double frame_shift_ms = 10.0;
  int64_t num_mel_bins = 23;
  double low_freq = 20.0;
  double high_freq = 0.0;  ///< <= 0: offset from the Nyquist frequency
  double preemphasis_coefficient = 0.97;
  bool remove_dc_offset = true;
  std::string window_type = "povey";  ///< povey, hanning, hamming, rectangular, blackman
  double blackman_coeff = 0.42;
  bool round_to_power_of_two = true;
  bool snip_edges = true;
  bool use_power = true;
  bool use_log_fbank = true;
  bool use_energy = false;  ///< add the frame's log energy: first column, or last with htk_compat
  bool raw_energy = true;   ///< energy before pre-emphasis and window
  double energy_floor = 1.0;
  bool htk_compat = false;
  bool subtract_mean = false;
};

/// UsageError naming the field when `options` are not valid (torchaudio's assertions): a window of
/// fewer than 2 samples, a shift of 0, a padded window of odd length, pre-emphasis outside
/// [0, 1], num_mel_bins <= 3, frequencies outside 0 <= low < high <= Nyquist, an unknown window.
void check_options(const KaldiFbankOptions& options);

/// Kaldi's mel filterbank (torchaudio's get_mel_banks without VTLN), float32
/// [num_mel_bins, padded_window / 2]: triangles over the FFT bins' centres on Kaldi's mel scale.
at::Tensor kaldi_mel_banks(const KaldiFbankOptions& options, int64_t padded_window);

/// The features of `waveform` (float [N], or [C, N] of which channel 0 is used, as torchaudio's
/// channel -1): [frames, num_mel_bins (+1 with use_energy)] in the waveform's type. UsageError for
/// invalid options, or a waveform that is not floating point or is shorter than one frame's
/// window (torchaudio's assertion).
at::Tensor kaldi_fbank(const at::Tensor& waveform, const KaldiFbankOptions& options = {});

}  // namespace oml::models
