#pragma once
// Audio datasets: the files of an audio dataframe (docs/data.md#audio-dataframes) as OML's
// AudioBaseDataset (oml/datasets/audios.py) gives them to an audio extractor
// (Extractor::input() == audio): each file decoded (oml/data/audio.h), downmixed to mono,
// resampled to the dataset's rate, then cut to a fixed number of frames from the row's
// `start_time` or padded with zeros.
//
//   auto audio = std::make_shared<AudioDataset>(dataframe.validation(), AudioDatasetOptions{});
//   Loader loader(audio, batches);   // batch->images: waveforms [B, 1, 48000] (3 s at 16 kHz)
//
// Items and batches:
//   load(i)      float32 [C, F]: C = 1 with convert_to_mono (else the file's channels), F =
//                int(max_num_seconds * sample_rate) (the file's resampled length without a
//                maximum);
//   collate(...) the items stacked: [B, C, F] (DataError when their sizes differ, which only
//                happens without max_num_seconds or without downmixing).
//
// Cutting and padding are OML's _trim_or_pad, kept as it is: with O = int(start_time *
// sample_rate) and L the resampled length, a file longer than F gives frames [O, O + F) (fewer
// when they run past its end), and whatever is shorter than F is padded with zeros on the LEFT;
// a file no longer than F is padded whole and its start_time is ignored; O > L is a DataError.
// Downmixing averages the channels (OML 4.0's code averages over time instead — `mean(dim=1)` on
// [channels, samples] — which gives one number per channel: a bug not reproduced here).
// Metadata (labels, categories, query/gallery flags) is the split's, as for images, so samplers,
// the DDP wrapper and validation handle audio batches unchanged.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/data/audio.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"

namespace oml::data {

struct AudioDatasetOptions {
  /// The rate every file is resampled to (OML's DEFAULT_SAMPLE_RATE; ECAPA-TDNN's front end is
  /// for 16 kHz).
  int64_t sample_rate = 16000;
  /// Each item's duration (OML's MAX_AUDIO_LEN): frames int(max_num_seconds * sample_rate);
  /// nullopt keeps whole files, which then only batch together when their lengths are equal.
  std::optional<double> max_num_seconds = 3.0;
  /// Average the channels into one (OML's DEFAULT_CONVERT_TO_MONO).
  bool convert_to_mono = true;
  /// Names the dataframe in messages ("data/df.csv").
  std::string source = "the dataframe";
};

/// UsageError naming the field unless sample_rate > 0 and max_num_seconds, when set, is finite,
/// > 0 and at least one frame long.
void check_options(const AudioDatasetOptions& options);

/// The file name endings OML's audio datasets accept: .mp3 .wav .ogg .flac (compared here without
/// regard to case).
const std::vector<std::string>& audio_extensions();

/// OML's AudioBaseDataset._trim_or_pad of `audio` [C, L]: see the header comment; the result is
/// [C, num_frames]. DataError "<place>: column 'start_time': ..." when frame_offset > L.
at::Tensor trim_or_pad(const at::Tensor& audio, int64_t frame_offset, int64_t num_frames,
                       const std::string& place);

/// F, the frames of every item: int(max_num_seconds * sample_rate); nullopt without
/// max_num_seconds (whole files).
std::optional<int64_t> item_frames(const AudioDatasetOptions& options);

/// What an AudioDataset makes of one decoded file (the server's requests go through it too):
/// downmixed with convert_to_mono, resampled to sample_rate, then trim_or_pad from
/// `frame_offset` to max_num_seconds' frames (kept whole without it). `place` names the item in
/// errors: resample_audio's, trim_or_pad's, and AudioTooLong when the resampled audio would
/// hold more than `limits.max_samples` (a clip at a low rate, upsampled, may be many times the
/// size of what was decoded).
at::Tensor audio_item(const Audio& audio, const AudioDatasetOptions& options, int64_t frame_offset,
                      const std::string& place, const AudioDecodeLimits& limits = {});

class AudioDataset : public Dataset {
 public:
  /// Unlabelled set: every audio file under `folder` (recursively; audio_extensions(), any case)
  /// in sorted path order, each cut from its start. DataError when the folder has none.
  static std::shared_ptr<AudioDataset> from_folder(const std::filesystem::path& folder,
                                                   AudioDatasetOptions options);

  /// Items are the rows of `split`, which must have paths, each ending in one of
  /// audio_extensions() (DataError naming options.source, the line and the path otherwise);
  /// `start_times`, when the split has them, place each item's segment. Files are read on load.
  AudioDataset(DataSplit split, AudioDatasetOptions options);

  int64_t size() const override { return static_cast<int64_t>(split_.size()); }
  ItemInfo info(int64_t index) const override;
  /// Row `index`'s waveform, float32 [C, F] (decoding is deterministic: `key` is not used).
  /// DataError naming the file when it is not audio, is empty or unreadable (read_audio), and
  /// naming the dataframe's line when its start_time lies past the end of the file.
  at::Tensor load(int64_t index, const RandomKey& key) const override;
  /// load()'s items stacked: [B, C, F]. DataError naming two of the items' rows when their sizes
  /// differ (whole files of different lengths without max_num_seconds, or channel counts that
  /// differ without convert_to_mono).
  at::Tensor collate(const std::vector<at::Tensor>& items,
                     const std::vector<int64_t>& indices) const override;
  const DataSplit& meta() const override { return split_; }

  const AudioDatasetOptions& options() const { return options_; }
  /// F, the frames of every item; nullopt without max_num_seconds.
  std::optional<int64_t> num_frames() const { return item_frames(options_); }
  /// int(start_time * sample_rate) of row `index` (0 without start times).
  int64_t frame_offset(int64_t index) const;

 private:
  DataSplit split_;
  AudioDatasetOptions options_;
};

}  // namespace oml::data
