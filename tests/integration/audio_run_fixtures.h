#pragma once
// What the tests of audio runs share: "speakers" synthesised on the spot (each label a voice of
// its own pitch and timbre, each item another utterance: its own length, pitch drift and
// syllable rate), written as 16-bit PCM WAV files at 16 kHz mono and 22.05 kHz stereo (so that
// runs resample and downmix), an audio dataframe over them with `start_time`, and the configs of
// an ECAPA-TDNN run with random weights. Nothing is downloaded and no Python runs.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "integration/pipeline_fixtures.h"
#include "support/support.h"

namespace oml::test {

// `samples` [frames x channels] interleaved, in [-1, 1], as a 16-bit PCM WAV file.
inline void write_wav(const fs::path& path, const std::vector<float>& samples, int rate, int channels) {
  fs::create_directories(path.parent_path());
  write_file(path, wav_bytes(samples, rate, channels));
}

// Speaker `speaker`'s utterance `item`, `seconds` long at `rate`: a voiced signal whose pitch
// (100 + 45 * speaker Hz, drifting by the item) and harmonic weights (the speaker's timbre) say
// who speaks, amplitude-modulated into syllables at the item's rate.
inline std::vector<float> utterance(int speaker, int item, double seconds, int rate) {
  const auto frames = static_cast<std::size_t>(seconds * rate);
  std::vector<float> out(frames);
  const double pi = std::acos(-1.0);
  const double f0 = 100.0 + 45.0 * speaker;
  const double drift = 0.04 * ((item % 3) - 1);
  const double syllables = 3.0 + 0.7 * item;
  for (std::size_t t = 0; t < frames; ++t) {
    const double time = static_cast<double>(t) / rate;
    const double pitch = f0 * (1.0 + drift * time);
    double value = 0.0;
    for (int h = 1; h <= 8; ++h) {
      const double weight = 1.0 / h * (1.0 + 0.8 * std::cos(0.9 * h * (speaker + 1)));
      value += weight * std::sin(2.0 * pi * pitch * h * time + 0.3 * h * item);
    }
    const double envelope = 0.55 + 0.45 * std::sin(2.0 * pi * syllables * time);
    out[t] = static_cast<float>(0.12 * envelope * value);
  }
  return out;
}

// The file of speaker `speaker`'s item `item` under `dir`: 16 kHz mono, or 22.05 kHz stereo with
// the channels a little apart, every third file.
inline std::string write_utterance(const fs::path& dir, int speaker, int item, double seconds) {
  const bool stereo = (speaker + item) % 3 == 0;
  const int rate = stereo ? 22050 : 16000;
  const std::string name =
      "speaker" + std::to_string(speaker) + "/take" + std::to_string(item) + (stereo ? "_22k.wav" : ".wav");
  const std::vector<float> mono = utterance(speaker, item, seconds, rate);
  if (!stereo) {
    write_wav(dir / name, mono, rate, 1);
    return name;
  }
  std::vector<float> both;
  both.reserve(2 * mono.size());
  for (const float sample : mono) {
    both.push_back(sample);
    both.push_back(0.8F * sample);
  }
  write_wav(dir / name, both, rate, 2);
  return name;
}

// Speakers 0-3 train (4 utterances each, 0.6 to 1.5 s), speakers 4-5 validation (3 each, every
// one a query and a gallery item). Speaker 0's take 3 is 2.5 s long and gives two rows, from 0 s
// and from 1.2 s (`start_time`).
inline void write_audio_dataframe(const fs::path& dir) {
  std::string csv = "label,path,split,is_query,is_gallery,start_time\n";
  for (int speaker = 0; speaker < 6; ++speaker) {
    const bool train = speaker < 4;
    for (int item = 0; item < (train ? 4 : 3); ++item) {
      const bool long_take = speaker == 0 && item == 3;
      const double seconds = long_take ? 2.5 : 0.6 + 0.3 * ((speaker + 2 * item) % 4);
      const std::string path = write_utterance(dir, speaker, item, seconds);
      const std::string split = train ? "train,," : "validation,True,True";
      csv += std::to_string(speaker) + "," + path + "," + split + "," + (long_take ? "0.0" : "") + "\n";
      if (long_take) csv += std::to_string(speaker) + "," + path + "," + split + ",1.2\n";
    }
  }
  write_file(dir / "df.csv", csv);
}

inline std::string audio_train_config(const TempDir& dir) {
  return "pipeline: extractor\nseed: 5\nnum_threads: 2\nnum_workers: 1\n"
         "dataset_root: " +
         (dir / "data").string() + "\nlogs_root: " + (dir / "logs").string() +
         "\nrun_name: run\n"
         "audio: {max_num_seconds: 1.0}\n"
         "sampler: {name: balance, args: {n_labels: 2, n_instances: 2, epoch_size: 2}}\n"
         "extractor: {name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie, weights: null}}\n"
         "criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}\n"
         "optimizer: {name: adam, args: {lr: 0.001}}\n"
         "max_epochs: 1\nvalid_period: 1\nbs_val: 4\n"
         "metric_args: {cmc_top_k: [1, 2], map_top_k: [2]}\n";
}

inline std::string audio_validate_config(const TempDir& dir, const fs::path& weights) {
  return "dataset_root: " + (dir / "data").string() + "\nlogs_root: " + (dir / "logs").string() +
         "\nrun_name: validation\nnum_threads: 2\nnum_workers: 1\nbs_val: 3\n"
         "audio: {max_num_seconds: 1.0}\n"
         "weights: " +
         weights.string() +
         "\n"
         "extractor: {name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie, weights: null}}\n"
         "metric_args: {cmc_top_k: [1, 2], map_top_k: [2]}\n";
}

// A folder with the audio dataframe (data/) and the training config (train.yaml).
inline void write_audio_run(const TempDir& dir) {
  write_audio_dataframe(dir / "data");
  write_file(dir / "train.yaml", audio_train_config(dir));
}

}  // namespace oml::test
