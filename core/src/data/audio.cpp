#include "oml/data/audio.h"

#include <sndfile.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <numbers>
#include <numeric>
#include <sstream>
#include <vector>

#include "oml/common/error.h"

namespace oml::data {
namespace {

// libsndfile reads through these callbacks from a buffer in memory, so that files, cached bytes
// and request bodies share one decoder.
struct MemoryFile {
  const std::string* bytes = nullptr;
  sf_count_t position = 0;
};

sf_count_t memory_length(void* user) {
  return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes->size());
}

sf_count_t memory_seek(sf_count_t offset, int whence, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const auto size = static_cast<sf_count_t>(file->bytes->size());
  sf_count_t target = offset;
  if (whence == SEEK_CUR) target = file->position + offset;
  if (whence == SEEK_END) target = size + offset;
  file->position = std::clamp<sf_count_t>(target, 0, size);
  return file->position;
}

sf_count_t memory_read(void* out, sf_count_t count, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const auto size = static_cast<sf_count_t>(file->bytes->size());
  const sf_count_t n = std::max<sf_count_t>(0, std::min(count, size - file->position));
  std::memcpy(out, file->bytes->data() + file->position, static_cast<std::size_t>(n));
  file->position += n;
  return n;
}

sf_count_t memory_write(const void*, sf_count_t, void*) { return 0; }  // opened for reading only

sf_count_t memory_tell(void* user) { return static_cast<MemoryFile*>(user)->position; }

struct SndfileCloser {
  void operator()(SNDFILE* handle) const { sf_close(handle); }
};

// `bytes` opened by libsndfile with its header checked; nothing decoded yet. Not movable: the
// handle reads through `memory`.
struct OpenedAudio {
  OpenedAudio(const std::string& bytes, const std::string& source, const AudioDecodeLimits& limits)
      : memory{&bytes, 0} {
    OML_CHECK(!bytes.empty(), DataError, source,
              ": the file is empty (0 bytes); expected an audio file (WAV, FLAC, OGG, MP3, ...)");
    handle.reset(sf_open_virtual(&io, SFM_READ, &info, &memory));
    OML_CHECK(handle != nullptr, DataError, source, ": not an audio file libsndfile can decode (",
              sf_strerror(nullptr),
              "); expected WAV, FLAC, OGG/Vorbis, MP3 or another format libsndfile reads");
    OML_CHECK(info.channels >= 1 && info.samplerate >= 1, DataError, source, ": the audio header says ",
              info.channels, " channels at ", info.samplerate,
              " Hz; expected at least one channel and a rate > 0");
    OML_CHECK(info.samplerate <= kMaxAudioSampleRate, DataError, source, ": the audio header says ",
              info.samplerate, " Hz; expected at most ", kMaxAudioSampleRate, " Hz");
    OML_CHECK(limits.max_channels <= 0 || info.channels <= limits.max_channels, DataError, source,
              ": the audio has ", info.channels, " channels; at most ", limits.max_channels, " are accepted");
  }
  OpenedAudio(const OpenedAudio&) = delete;
  OpenedAudio& operator=(const OpenedAudio&) = delete;

  MemoryFile memory;
  SF_VIRTUAL_IO io{memory_length, memory_seek, memory_read, memory_write, memory_tell};
  SF_INFO info{};
  std::unique_ptr<SNDFILE, SndfileCloser> handle;
};

// torchaudio's _get_sinc_resample_kernel (sinc_interp_hann, dtype None: float64, then float32):
// kernel [new_freq, 1, 2 * width + orig_freq] for the gcd-reduced rates, and its half width.
std::pair<at::Tensor, int64_t> sinc_resample_kernel(int64_t orig_freq, int64_t new_freq) {
  constexpr double kLowpassFilterWidth = 6.0;
  constexpr double kRolloff = 0.99;
  const double base_freq = static_cast<double>(std::min(orig_freq, new_freq)) * kRolloff;
  const auto width =
      static_cast<int64_t>(std::ceil(kLowpassFilterWidth * static_cast<double>(orig_freq) / base_freq));
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const at::Tensor idx = torch::arange(-width, width + orig_freq, f64).view({1, 1, -1}) / orig_freq;
  // torchaudio divides an int64 arange by new_freq, which makes float32 values, then adds idx.
  const at::Tensor steps =
      (torch::arange(0, -new_freq, -1, torch::kInt64).to(torch::kFloat32) / new_freq).to(torch::kFloat64);
  at::Tensor t = (steps.view({-1, 1, 1}) + idx) * base_freq;
  t = t.clamp(-kLowpassFilterWidth, kLowpassFilterWidth);
  const at::Tensor window = torch::cos(t * std::numbers::pi / kLowpassFilterWidth / 2).pow(2);
  t = t * std::numbers::pi;
  at::Tensor kernels = torch::where(t == 0, torch::ones_like(t), t.sin() / t);
  kernels = kernels * (window * (base_freq / static_cast<double>(orig_freq)));
  return {kernels.to(torch::kFloat32), width};
}

// The values of sinc_resample_kernel's kernel, [next, ~orig + 2 * 6 * orig / next] for the rates
// divided by their gcd: rates with a small gcd (a prime rate such as 47999 Hz) would ask for
// gigabytes. Common rates (8 to 192 kHz) need well under a million.
double kernel_values(int64_t from_rate, int64_t to_rate) {
  const int64_t gcd = std::gcd(from_rate, to_rate);
  const auto orig = static_cast<double>(from_rate / gcd);
  const auto next = static_cast<double>(to_rate / gcd);
  return next * (orig + 16.0 * orig / next + 16.0);
}

}  // namespace

AudioHeader read_audio_header(const std::string& bytes, const std::string& source,
                              const AudioDecodeLimits& limits) {
  const OpenedAudio audio(bytes, source, limits);
  return {audio.info.channels, audio.info.samplerate};
}

Audio decode_audio(const std::string& bytes, const std::string& source, const AudioDecodeLimits& limits) {
  const OpenedAudio opened(bytes, source, limits);
  const SF_INFO& info = opened.info;
  SNDFILE* handle = opened.handle.get();
  const int64_t channels = info.channels;
  // Read in blocks until the decoder stops: a header's frame count is not reliable for every
  // format (MP3, streamed OGG), and a small file may decode to hours (a FLAC of silence), so the
  // limit is checked on what is decoded. Blocks hold 2^18 samples whatever the channel count.
  const sf_count_t block_frames = std::max<sf_count_t>(1, (sf_count_t{1} << 18) / channels);
  std::vector<float> interleaved;
  std::vector<float> block(static_cast<std::size_t>(channels * block_frames));
  while (true) {
    const sf_count_t got = sf_readf_float(handle, block.data(), block_frames);
    if (got <= 0) break;
    interleaved.insert(interleaved.end(), block.begin(), block.begin() + got * channels);
    if (limits.max_samples > 0 && static_cast<int64_t>(interleaved.size()) > limits.max_samples) {
      throw AudioTooLong(
          ::oml::detail::concat(source, ": the audio decodes to more than ", limits.max_samples, " samples (",
                                limits.max_samples * 4 / (1024 * 1024), " MiB of float32, ", limits.setting,
                                "; ", limits.max_samples / channels / info.samplerate, " s of this file's ",
                                channels, " channels at ", info.samplerate, " Hz): send a shorter clip"));
    }
  }
  const int error = sf_error(handle);
  OML_CHECK(error == SF_ERR_NO_ERROR, DataError, source, ": decoding failed (", sf_error_number(error),
            "); the file may be truncated or damaged");
  const auto frames = static_cast<int64_t>(interleaved.size()) / channels;
  OML_CHECK(frames > 0, DataError, source, ": the audio file holds no samples (", channels, " channels at ",
            info.samplerate, " Hz, 0 frames)");
  // A copy, always: for one channel the transpose is already contiguous, and contiguous() would
  // return a view of `interleaved`, which dies here.
  const at::Tensor samples = torch::from_blob(interleaved.data(), {frames, channels}, torch::kFloat32)
                                 .t()
                                 .clone(at::MemoryFormat::Contiguous);
  return {samples, info.samplerate};
}

Audio read_audio(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  OML_CHECK(in.good(), DataError, file.string(), ": cannot be opened (expected an audio file: ",
            std::filesystem::exists(file) ? "it exists but is not readable" : "it does not exist", ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  OML_CHECK(!in.bad(), DataError, file.string(), ": reading failed");
  return decode_audio(bytes.str(), file.string());
}

at::Tensor downmix_to_mono(const at::Tensor& samples) {
  OML_CHECK(samples.dim() == 2 && samples.size(0) >= 1 && samples.is_floating_point(), UsageError,
            "downmix_to_mono takes float samples [channels, frames], got ", samples.sizes(), " ",
            samples.scalar_type());
  if (samples.size(0) == 1) return samples;
  return samples.mean(0, /*keepdim=*/true);
}

int64_t resampled_frames(int64_t frames, int64_t from_rate, int64_t to_rate) {
  OML_CHECK(from_rate > 0 && to_rate > 0 && frames >= 0, UsageError, "resampled_frames: ", frames,
            " frames, ", from_rate, " Hz -> ", to_rate, " Hz");
  const int64_t gcd = std::gcd(from_rate, to_rate);
  // torchaudio: ceil(new_freq * length / orig_freq) for the reduced rates, in double precision.
  return static_cast<int64_t>(std::ceil(static_cast<double>(to_rate / gcd) * static_cast<double>(frames) /
                                        static_cast<double>(from_rate / gcd)));
}

int64_t resample_filter_bytes(int64_t from_rate, int64_t to_rate) {
  if (from_rate == to_rate) return 0;
  // sinc_resample_kernel holds up to six float64 tensors of the kernel's size and a bool mask at
  // once (t, window, ones, sin, the quotient and where's result): 49 bytes a value, rounded up.
  constexpr double kTemporaries = 7.0;
  return static_cast<int64_t>(std::min(kernel_values(from_rate, to_rate) * 8.0 * kTemporaries, 9.0e18));
}

int64_t common_rate_filter_bytes(int64_t to_rate) {
  int64_t most = 0;
  for (const int64_t rate : {8000, 11025, 16000, 22050, 32000, 44100, 48000, 88200, 96000})
    most = std::max(most, resample_filter_bytes(rate, to_rate));
  return most;
}

at::Tensor resample_audio(const at::Tensor& waveform, int64_t from_rate, int64_t to_rate) {
  OML_CHECK(from_rate > 0 && to_rate > 0, UsageError, "resample_audio: rates must be > 0, got ", from_rate,
            " Hz -> ", to_rate, " Hz");
  OML_CHECK(waveform.dim() >= 1 && waveform.is_floating_point(), UsageError,
            "resample_audio takes a float waveform [..., samples], got ", waveform.sizes(), " ",
            waveform.scalar_type());
  if (from_rate == to_rate) return waveform;
  const int64_t gcd = std::gcd(from_rate, to_rate);
  const int64_t orig = from_rate / gcd;
  const int64_t next = to_rate / gcd;
  const double values = kernel_values(from_rate, to_rate);
  OML_CHECK(values <= kMaxResampleKernelValues, DataError, "resampling from ", from_rate, " Hz to ", to_rate,
            " Hz needs a filter of ", static_cast<int64_t>(values),
            " values (the rates' greatest common divisor is ", gcd, "), more than ",
            static_cast<int64_t>(kMaxResampleKernelValues),
            ": convert the file to a common rate (8, 16, 22.05, 44.1 or 48 kHz) first");
  const auto [kernel, width] = sinc_resample_kernel(orig, next);

  const auto shape = waveform.sizes().vec();
  const int64_t length = shape.back();
  const at::Tensor flat = waveform.reshape({-1, length});
  const at::Tensor padded = torch::constant_pad_nd(flat, {width, width + orig});
  at::Tensor out = torch::conv1d(padded.unsqueeze(1), kernel.to(waveform.scalar_type()).to(waveform.device()),
                                 /*bias=*/{}, /*stride=*/orig);
  out = out.transpose(1, 2).reshape({flat.size(0), -1});
  out = out.narrow(1, 0, std::min(resampled_frames(length, from_rate, to_rate), out.size(1)));
  auto out_shape = shape;
  out_shape.back() = out.size(1);
  return out.reshape(out_shape);
}

}  // namespace oml::data
