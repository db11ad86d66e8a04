#pragma once
// Audio files as OML's audio datasets read them (oml/datasets/audios.py, torchaudio.load), decoded
// by libsndfile: WAV, FLAC, OGG/Vorbis, MP3 and the other formats it knows, recognised by their
// content, not their name.
//
//   Audio clip = read_audio("data/a.flac");                 // float32 [channels, samples], its rate
//   at::Tensor mono = downmix_to_mono(clip.samples);         // [1, samples]
//   at::Tensor x = resample_audio(mono, clip.sample_rate, 16000);
//
// Samples are float32 in [-1, 1] as torchaudio.load(normalize=True) gives them: integer PCM
// divided by its full scale (libsndfile's normalisation: 2^15 for 16-bit, 2^31 for 32-bit).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace oml::data {

/// One decoded audio file: `samples` float32 [channels, frames] (contiguous), `sample_rate` in Hz.
struct Audio {
  at::Tensor samples;
  int64_t sample_rate = 0;

  int64_t channels() const { return samples.size(0); }
  int64_t frames() const { return samples.size(1); }
};

/// Decodes `file`. DataError naming the file when it cannot be opened or read, is empty, is not
/// audio libsndfile can decode (its reason is quoted), or holds no samples.
Audio read_audio(const std::filesystem::path& file);

/// Decodes a file's `bytes` held in memory; `source` names them in messages ("data/a.wav", "the
/// request's \"audio\""). Same errors as read_audio.
Audio decode_audio(const std::string& bytes, const std::string& source);

/// The average of the channels, [C, N] -> [1, N] (a mono [1, N] is returned as it is).
/// UsageError unless `samples` is a float tensor [C, N] with C >= 1.
at::Tensor downmix_to_mono(const at::Tensor& samples);

/// `waveform` [..., N] sampled at `from_rate` resampled to `to_rate` (Hz, both > 0: UsageError
/// otherwise), as torchaudio.functional.resample and torchaudio.transforms.Resample do by
/// default: band-limited sinc interpolation with a Hann window, lowpass_filter_width 6, rolloff
/// 0.99, the kernel computed in float64 for the rates divided by their gcd; the output has
/// ceil(N * to_rate / from_rate) samples. Equal rates return `waveform` unchanged.
at::Tensor resample_audio(const at::Tensor& waveform, int64_t from_rate, int64_t to_rate);

}  // namespace oml::data
