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

#include "oml/common/error.h"

namespace oml::data {

/// One decoded audio file: `samples` float32 [channels, frames] (contiguous), `sample_rate` in Hz.
struct Audio {
  at::Tensor samples;
  int64_t sample_rate = 0;

  int64_t channels() const { return samples.size(0); }
  int64_t frames() const { return samples.size(1); }
};

/// The highest sample rate a header may claim (DataError above it): 768 kHz, beyond any recording.
inline constexpr int64_t kMaxAudioSampleRate = 768000;
/// The largest resampling filter resample_audio builds (DataError above it): 2^26 values, 512 MB.
inline constexpr double kMaxResampleKernelValues = 67108864.0;

/// Audio that decodes to more than AudioDecodeLimits::max_samples (oml-serve answers 413).
struct AudioTooLong : DataError {
  using DataError::DataError;
};

/// What a decode may produce, for bytes from strangers: a small compressed file may decode to
/// hours of samples, and a header may claim any number of channels.
struct AudioDecodeLimits {
  int64_t max_samples = 0;   ///< samples of all channels together (4 bytes each); 0: no limit
  int64_t max_channels = 0;  ///< 0: no limit (libsndfile's own is 1024); more is a DataError
  std::string setting;       ///< names the limit in AudioTooLong's message ("--max-audio-mb")
};

/// What a file's header says, read before a sample is decoded.
struct AudioHeader {
  int64_t channels = 0;
  int64_t sample_rate = 0;
};

/// The header of a file's `bytes` (see decode_audio): the same DataErrors as decode_audio for a
/// file that is not audio, or whose channels or rate are out of bounds or over `limits`.
AudioHeader read_audio_header(const std::string& bytes, const std::string& source,
                              const AudioDecodeLimits& limits = {});

/// Decodes `file`. DataError naming the file when it cannot be opened or read, is empty, is not
/// audio libsndfile can decode (its reason is quoted), holds no samples, or claims a rate above
/// kMaxAudioSampleRate.
Audio read_audio(const std::filesystem::path& file);

/// Decodes a file's `bytes` held in memory; `source` names them in messages ("data/a.wav", "the
/// request's \"audio\""). Same errors as read_audio, and AudioTooLong as soon as what is decoded
/// exceeds `limits`.
Audio decode_audio(const std::string& bytes, const std::string& source, const AudioDecodeLimits& limits = {});

/// The average of the channels, [C, N] -> [1, N] (a mono [1, N] is returned as it is).
/// UsageError unless `samples` is a float tensor [C, N] with C >= 1.
at::Tensor downmix_to_mono(const at::Tensor& samples);

/// `waveform` [..., N] sampled at `from_rate` resampled to `to_rate` (Hz, both > 0: UsageError
/// otherwise), as torchaudio.functional.resample and torchaudio.transforms.Resample do by
/// default: band-limited sinc interpolation with a Hann window, lowpass_filter_width 6, rolloff
/// 0.99, the kernel computed in float64 for the rates divided by their gcd; the output has
/// ceil(N * to_rate / from_rate) samples. Equal rates return `waveform` unchanged. DataError when
/// the filter would exceed kMaxResampleKernelValues (rates whose gcd is small, e.g. 47999 Hz).
at::Tensor resample_audio(const at::Tensor& waveform, int64_t from_rate, int64_t to_rate);

/// The samples per channel resample_audio returns for `frames` samples at `from_rate`.
int64_t resampled_frames(int64_t frames, int64_t from_rate, int64_t to_rate);

/// About the most memory resample_audio takes while it builds its filter from `from_rate` to
/// `to_rate` (float64 temporaries of the kernel's size): 0 for equal rates, at most 16 MiB for the
/// common rates, gigabytes for rates whose gcd is small, which a server must budget before
/// accepting them.
int64_t resample_filter_bytes(int64_t from_rate, int64_t to_rate);

/// The largest resample_filter_bytes from a common rate (8, 11.025, 16, 22.05, 32, 44.1, 48, 88.2
/// or 96 kHz) to `to_rate`: what a server's decode budget must hold beside a clip so that every
/// common rate is served.
int64_t common_rate_filter_bytes(int64_t to_rate);

}  // namespace oml::data
