#include "oml/data/audio_dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <utility>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/audio.h"

namespace oml::data {
namespace {

std::string lower_extension(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

}  // namespace

void check_options(const AudioDatasetOptions& options) {
  OML_CHECK(options.sample_rate > 0 && options.sample_rate <= kMaxAudioSampleRate, UsageError,
            "audio dataset: sample_rate must be from 1 to ", kMaxAudioSampleRate, " Hz, got ",
            options.sample_rate);
  if (options.max_num_seconds) {
    const double seconds = *options.max_num_seconds;
    OML_CHECK(std::isfinite(seconds) && seconds > 0, UsageError,
              "audio dataset: max_num_seconds must be a number > 0 (or unset to keep whole files), got ",
              seconds);
    OML_CHECK(static_cast<int64_t>(seconds * static_cast<double>(options.sample_rate)) >= 1, UsageError,
              "audio dataset: max_num_seconds ", seconds, " is less than one frame at ", options.sample_rate,
              " Hz");
  }
}

const std::vector<std::string>& audio_extensions() {
  static const std::vector<std::string> extensions = {".mp3", ".wav", ".ogg",
                                                      ".flac"};  // OML's AUDIO_EXTENSIONS
  return extensions;
}

at::Tensor trim_or_pad(const at::Tensor& audio, int64_t frame_offset, int64_t num_frames,
                       const std::string& place) {
  OML_ASSERT(audio.dim() == 2 && num_frames >= 1 && frame_offset >= 0, "audio ", audio.sizes(), ", offset ",
             frame_offset, ", frames ", num_frames);
  const int64_t length = audio.size(1);
  OML_CHECK(frame_offset <= length, DataError, place, ": column '", columns::kStartTime,
            "': the segment starts at frame ", frame_offset, ", past the end of the audio (", length,
            " frames after resampling)");
  at::Tensor out = audio;
  // OML cuts only a file longer than the segment; a shorter one keeps its start.
  if (length > num_frames) out = out.narrow(1, frame_offset, std::min(num_frames, length - frame_offset));
  if (out.size(1) < num_frames) out = torch::constant_pad_nd(out, {num_frames - out.size(1), 0});  // left
  return out.contiguous();
}

AudioDataset::AudioDataset(DataSplit split, AudioDatasetOptions options)
    : split_(std::move(split)), options_(std::move(options)) {
  check_options(options_);
  OML_CHECK(split_.has_paths() && split_.paths.size() == split_.size(), DataError, options_.source,
            ": an audio dataset needs a 'path' for every row (", split_.paths.size(), " paths for ",
            split_.size(), " rows)",
            split_.has_texts() ? "; these rows are texts, which a text extractor reads" : "");
  OML_CHECK(!split_.has_start_times() || split_.start_times.size() == split_.size(), DataError,
            options_.source, ": ", split_.start_times.size(), " start times for ", split_.size(), " rows");
  const auto& known = audio_extensions();
  for (std::size_t i = 0; i < split_.size(); ++i) {
    const std::string extension = lower_extension(split_.paths[i]);
    OML_CHECK(std::find(known.begin(), known.end(), extension) != known.end(), DataError, options_.source,
              ":", split_.lines[i], ": column 'path': got '", split_.paths[i],
              "', expected an audio file ending in ", join(known), " (as OML's audio datasets)");
  }
}

ItemInfo AudioDataset::info(int64_t index) const { return item_info(split_, index); }

int64_t AudioDataset::frame_offset(int64_t index) const {
  if (!split_.has_start_times()) return 0;
  // Python's int(): truncation toward zero.
  return static_cast<int64_t>(split_.start_times[static_cast<std::size_t>(index)] *
                              static_cast<double>(options_.sample_rate));
}

std::optional<int64_t> item_frames(const AudioDatasetOptions& options) {
  if (!options.max_num_seconds) return std::nullopt;
  return static_cast<int64_t>(*options.max_num_seconds * static_cast<double>(options.sample_rate));
}

at::Tensor audio_item(const Audio& audio, const AudioDatasetOptions& options, int64_t frame_offset,
                      const std::string& place, const AudioDecodeLimits& limits) {
  at::Tensor samples = options.convert_to_mono ? downmix_to_mono(audio.samples) : audio.samples;
  if (limits.max_samples > 0) {
    const int64_t total =
        resampled_frames(samples.size(-1), audio.sample_rate, options.sample_rate) * samples.size(0);
    if (total > limits.max_samples) {
      throw AudioTooLong(::oml::detail::concat(
          place, ": resampled from ", audio.sample_rate, " Hz to ", options.sample_rate,
          " Hz, the audio would hold ", total, " samples, more than ", limits.max_samples, " (",
          limits.max_samples * 4 / (1024 * 1024), " MiB of float32, ", limits.setting,
          "): send a shorter clip, or one at the model's rate"));
    }
  }
  try {
    samples = resample_audio(samples, audio.sample_rate, options.sample_rate);
  } catch (const DataError& e) {
    throw DataError(place + ": " + e.what());
  }
  const std::optional<int64_t> num_frames = item_frames(options);
  if (!num_frames) return samples.contiguous();
  return trim_or_pad(samples, frame_offset, *num_frames, place);
}

std::shared_ptr<AudioDataset> AudioDataset::from_folder(const std::filesystem::path& folder,
                                                        AudioDatasetOptions options) {
  DataSplit split;
  split.paths = files_under(folder, audio_extensions(), "audio files");
  for (std::size_t i = 0; i < split.paths.size(); ++i) split.lines.push_back(static_cast<int64_t>(i) + 1);
  if (options.source == AudioDatasetOptions{}.source) options.source = "folder " + folder.string();
  return std::make_shared<AudioDataset>(std::move(split), std::move(options));
}

at::Tensor AudioDataset::load(int64_t index, const RandomKey&) const {
  OML_ASSERT(index >= 0 && index < size(), "audio item ", index, " of ", size());
  const auto row = static_cast<std::size_t>(index);
  const std::string place =
      options_.source + ":" + std::to_string(split_.lines[row]) + " (" + split_.paths[row] + ")";
  return audio_item(read_audio(split_.paths[row]), options_, frame_offset(index), place);
}

at::Tensor AudioDataset::collate(const std::vector<at::Tensor>& items,
                                 const std::vector<int64_t>& indices) const {
  OML_ASSERT(!items.empty() && items.size() == indices.size(), items.size(), " items for ", indices.size(),
             " indices");
  for (std::size_t i = 1; i < items.size(); ++i) {
    OML_CHECK(items[i].sizes() == items[0].sizes(), DataError, options_.source,
              ": cannot batch audio of different sizes: line ",
              split_.lines[static_cast<std::size_t>(indices[0])], " gives ", items[0].sizes(), " but line ",
              split_.lines[static_cast<std::size_t>(indices[i])], " gives ", items[i].sizes(),
              " (set max_num_seconds to cut every item to one length, and convert_to_mono for one channel)");
  }
  return torch::stack(items);
}

}  // namespace oml::data
