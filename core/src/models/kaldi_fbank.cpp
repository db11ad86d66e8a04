#include "oml/models/kaldi_fbank.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "oml/common/error.h"

namespace oml::models {

namespace {

struct Frames {
  int64_t shift = 0;   // samples between frames
  int64_t size = 0;    // samples per frame
  int64_t padded = 0;  // the FFT's length
};

Frames frames_of(const KaldiFbankOptions& o) {
  Frames f;
  // Python's int(): truncation.
  f.shift = static_cast<int64_t>(o.sample_frequency * o.frame_shift_ms * 0.001);
  f.size = static_cast<int64_t>(o.sample_frequency * o.frame_length_ms * 0.001);
  f.padded = f.size;
  if (o.round_to_power_of_two && f.size > 0) {
    f.padded = 1;
    while (f.padded < f.size) f.padded *= 2;
  }
  return f;
}

double kaldi_mel(double hz) { return 1127.0 * std::log(1.0 + hz / 700.0); }

double nyquist_high(const KaldiFbankOptions& o) {
  return o.high_freq <= 0.0 ? o.high_freq + 0.5 * o.sample_frequency : o.high_freq;
}

at::Tensor window_function(const KaldiFbankOptions& o, int64_t size, const at::TensorOptions& type) {
  if (o.window_type == "hanning") return torch::hann_window(size, /*periodic=*/false, type);
  if (o.window_type == "hamming") return torch::hamming_window(size, /*periodic=*/false, 0.54, 0.46, type);
  if (o.window_type == "povey") return torch::hann_window(size, /*periodic=*/false, type).pow(0.85);
  if (o.window_type == "rectangular") return torch::ones({size}, type);
  // blackman, with Kaldi's coefficient (torch.blackman_window's differ).
  const double a = 2.0 * std::numbers::pi / static_cast<double>(size - 1);
  const at::Tensor n = torch::arange(size, type);
  return o.blackman_coeff - 0.5 * torch::cos(a * n) + (0.5 - o.blackman_coeff) * torch::cos(2.0 * a * n);
}

/// The frames of `wave` [N] as rows [m, size] (torchaudio's _get_strided).
at::Tensor strided_frames(at::Tensor wave, const Frames& f, bool snip_edges) {
  const int64_t n = wave.size(0);
  int64_t m = 0;
  if (snip_edges) {
    m = 1 + (n - f.size) / f.shift;
  } else {
    // Mirrored at both ends, the edge sample repeated: [2, 1, 0, 0, 1, 2], Kaldi's padding.
    const at::Tensor reversed = wave.flip({0});
    m = (n + f.shift / 2) / f.shift;
    const int64_t pad = f.size / 2 - f.shift / 2;
    if (pad > 0) {
      wave = torch::cat({reversed.slice(0, n - pad), wave, reversed});
    } else {
      wave = torch::cat({wave.slice(0, -pad), reversed});
    }
  }
  return wave.contiguous().as_strided({m, f.size}, {f.shift, 1});
}

}  // namespace

void check_options(const KaldiFbankOptions& o) {
  const Frames f = frames_of(o);
  OML_CHECK(o.sample_frequency > 0, UsageError, "kaldi_fbank: sample_frequency must be > 0, got ",
            o.sample_frequency);
  OML_CHECK(f.size >= 2, UsageError, "kaldi_fbank: frame_length_ms ", o.frame_length_ms, " at ",
            o.sample_frequency, " Hz gives a window of ", f.size, " samples; at least 2 are needed");
  OML_CHECK(f.shift > 0, UsageError, "kaldi_fbank: frame_shift_ms ", o.frame_shift_ms, " at ",
            o.sample_frequency, " Hz gives a shift of 0 samples");
  OML_CHECK(f.padded % 2 == 0, UsageError, "kaldi_fbank: the padded window (", f.padded,
            " samples) must be even: set round_to_power_of_two or change frame_length_ms");
  OML_CHECK(o.preemphasis_coefficient >= 0.0 && o.preemphasis_coefficient <= 1.0, UsageError,
            "kaldi_fbank: preemphasis_coefficient must be in [0, 1], got ", o.preemphasis_coefficient);
  OML_CHECK(o.num_mel_bins > 3, UsageError, "kaldi_fbank: num_mel_bins must be > 3, got ", o.num_mel_bins);
  const double nyquist = 0.5 * o.sample_frequency;
  const double high = nyquist_high(o);
  OML_CHECK(0.0 <= o.low_freq && o.low_freq < nyquist && 0.0 < high && high <= nyquist && o.low_freq < high,
            UsageError, "kaldi_fbank: low_freq ", o.low_freq, " and high_freq ", o.high_freq,
            " must satisfy 0 <= low < high <= ", nyquist,
            " (the Nyquist frequency; high <= 0 is an offset from it)");
  OML_CHECK(o.window_type == "povey" || o.window_type == "hanning" || o.window_type == "hamming" ||
                o.window_type == "rectangular" || o.window_type == "blackman",
            UsageError, "kaldi_fbank: window_type '", o.window_type,
            "' is not one of povey, hanning, hamming, rectangular, blackman");
}

namespace {

at::Tensor mel_banks(const KaldiFbankOptions& o, int64_t padded_window) {
  // As torchaudio: the band edges in double, the FFT bins' mel values and the slopes in float32.
  const double mel_low = kaldi_mel(o.low_freq);
  const double mel_high = kaldi_mel(nyquist_high(o));
  const double delta = (mel_high - mel_low) / static_cast<double>(o.num_mel_bins + 1);
  const at::Tensor bin = torch::arange(o.num_mel_bins, torch::kLong).unsqueeze(1);
  const at::Tensor left = mel_low + bin * delta;
  const at::Tensor center = mel_low + (bin + 1.0) * delta;
  const at::Tensor right = mel_low + (bin + 2.0) * delta;
  const double bin_width = o.sample_frequency / static_cast<double>(padded_window);
  const at::Tensor fft_mel =
      (1127.0 * (1.0 + bin_width * torch::arange(padded_window / 2, torch::kFloat32) / 700.0).log())
          .unsqueeze(0);
  const at::Tensor up = (fft_mel - left) / (center - left);
  const at::Tensor down = (right - fft_mel) / (right - center);
  return torch::max(torch::zeros({1}), torch::min(up, down));
}

}  // namespace

at::Tensor kaldi_mel_banks(const KaldiFbankOptions& o, int64_t padded_window) {
  check_options(o);
  return mel_banks(o, padded_window);
}

at::Tensor kaldi_fbank(const at::Tensor& waveform, const KaldiFbankOptions& o) {
  check_options(o);
  OML_CHECK(waveform.is_floating_point() && (waveform.dim() == 1 || waveform.dim() == 2), UsageError,
            "kaldi_fbank takes a float waveform [N] or [channels, N], got ", waveform.scalar_type(), " ",
            waveform.sizes());
  const at::Tensor wave = waveform.dim() == 2 ? waveform[0] : waveform;
  const Frames f = frames_of(o);
  OML_CHECK(wave.size(0) >= f.size, UsageError, "kaldi_fbank: a waveform of ", wave.size(0),
            " samples is shorter than one frame (", f.size, " samples)");
  const auto type = wave.options();
  const at::Tensor epsilon = torch::tensor(std::numeric_limits<float>::epsilon(), type);

  at::Tensor frames = strided_frames(wave, f, o.snip_edges);
  if (o.remove_dc_offset) frames = frames - frames.mean(1, /*keepdim=*/true);
  const auto log_energy = [&](const at::Tensor& x) {
    at::Tensor energy = torch::max(x.pow(2).sum(1), epsilon).log();
    if (o.energy_floor != 0.0) energy = torch::max(energy, torch::tensor(std::log(o.energy_floor), type));
    return energy;
  };
  at::Tensor energy;
  if (o.use_energy && o.raw_energy) energy = log_energy(frames);
  if (o.preemphasis_coefficient != 0.0) {
    const at::Tensor previous = torch::cat({frames.slice(1, 0, 1), frames.slice(1, 0, -1)}, 1);
    frames = frames - o.preemphasis_coefficient * previous;
  }
  frames = frames * window_function(o, f.size, type).unsqueeze(0);
  if (f.padded != f.size) frames = torch::constant_pad_nd(frames, {0, f.padded - f.size});
  if (o.use_energy && !o.raw_energy) energy = log_energy(frames);

  at::Tensor spectrum = torch::fft_rfft(frames).abs();
  if (o.use_power) spectrum = spectrum.pow(2.0);
  const at::Tensor banks =
      torch::constant_pad_nd(mel_banks(o, f.padded).to(type), {0, 1});  // the Nyquist bin: 0
  at::Tensor features = torch::mm(spectrum, banks.t());
  if (o.use_log_fbank) features = torch::max(features, epsilon).log();
  if (o.use_energy) {
    features = o.htk_compat ? torch::cat({features, energy.unsqueeze(1)}, 1)
                            : torch::cat({energy.unsqueeze(1), features}, 1);
  }
  if (o.subtract_mean) features = features - features.mean(0, /*keepdim=*/true);
  return features;
}

}  // namespace oml::models
