// Audio data: decoding files with libsndfile (oml/data/audio.h) against what soundfile reads from
// the same files, resampling against torchaudio, audio dataframes' `start_time` column, the
// audio dataset (oml/data/audio_dataset.h) against OML 4.0's AudioLabeledDataset and
// AudioQueryGalleryLabeledDataset, and Kaldi's filterbank features (oml/models/kaldi_fbank.h)
// against torchaudio.compliance.kaldi.fbank. tests/python/audio_reference.py writes the speech-like test
// signals (fixed seeds, nothing downloaded) and the references.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/audio_reference.h"
#include "oml/common/error.h"
#include "oml/data/audio.h"
#include "oml/data/audio_dataset.h"
#include "oml/data/dataframe.h"
#include "oml/io/torch_file.h"
#include "oml/models/kaldi_fbank.h"
#include "support/support.h"

namespace audio_tests {

using Catch::Matchers::Contains;
using oml::data::AudioDataset;
using oml::data::AudioDatasetOptions;
using oml::data::Dataframe;
using oml::test::max_abs_diff;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

// The signals audio_reference.py writes: file name, rate, channels.
struct Signal {
  std::string name;
  std::string file;
  int64_t rate;
  int64_t channels;
};

const std::vector<Signal>& signals() {
  static const std::vector<Signal> all = {{"mono16k", "mono16k.wav", 16000, 1},
                                          {"stereo44k", "stereo44k.wav", 44100, 2},
                                          {"mono22k_flac", "mono22k_flac.flac", 22050, 1},
                                          {"mono8k_float", "mono8k_float.wav", 8000, 1},
                                          {"stereo48k_flac", "stereo48k_flac.flac", 48000, 2}};
  return all;
}

// A canonical 16-bit PCM WAV header for `frames` mono frames at 16 kHz, followed by them.
std::string wav_bytes(int64_t frames) {
  std::string out;
  const auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  const auto u16 = [&](uint16_t v) {
    out += static_cast<char>(v & 0xFF);
    out += static_cast<char>(v >> 8);
  };
  const auto data_bytes = static_cast<uint32_t>(frames * 2);
  out += "RIFF";
  u32(36 + data_bytes);
  out += "WAVEfmt ";
  u32(16);
  u16(1);  // PCM
  u16(1);  // channels
  u32(16000);
  u32(32000);
  u16(2);
  u16(16);
  out += "data";
  u32(data_bytes);
  for (int64_t i = 0; i < frames; ++i)
    u16(static_cast<uint16_t>(static_cast<int16_t>(1000 * (i % 7) - 3000)));
  return out;
}

Dataframe audio_dataframe(const fs::path& dir, const std::string& csv, bool check_files = false) {
  oml::data::DataframeOptions options;
  options.dataset_root = dir;
  options.check_files = check_files;
  return Dataframe::parse(csv, (dir / "df.csv").string(), options);
}

}  // namespace

TEST_CASE("read_audio gives the samples and rate soundfile reads from WAV and FLAC files, mono and stereo",
          "[audio][data][pytorch]") {
  const fs::path& dir = oml::test::audio_signals();
  for (const Signal& signal : signals()) {
    INFO(signal.file);
    const oml::data::Audio audio = oml::data::read_audio(dir / signal.file);
    const at::Tensor expected = oml::io::load_tensor(dir / (signal.name + "_samples.pt"));
    CHECK(audio.sample_rate == signal.rate);
    CHECK(audio.channels() == signal.channels);
    REQUIRE(audio.samples.sizes() == expected.sizes());
    CHECK(audio.samples.scalar_type() == torch::kFloat32);
    CHECK(max_abs_diff(audio.samples, expected) == 0.0);
  }
}

TEST_CASE("Downmixed and resampled to 16 kHz, every signal equals torchaudio's resample to 1e-4",
          "[audio][data][pytorch]") {
  const fs::path& dir = oml::test::audio_signals();
  for (const Signal& signal : signals()) {
    INFO(signal.file);
    const oml::data::Audio audio = oml::data::read_audio(dir / signal.file);
    const at::Tensor mono = oml::data::downmix_to_mono(audio.samples);
    const at::Tensor resampled = oml::data::resample_audio(mono, audio.sample_rate, 16000);
    for (const std::string suffix : {"_16k.pt", "_16k_transform.pt"}) {
      INFO(suffix);
      const at::Tensor expected = oml::io::load_tensor(dir / (signal.name + suffix));
      REQUIRE(resampled.sizes() == expected.sizes());
      CHECK(max_abs_diff(resampled, expected) <= 1e-4);
    }
  }
}

TEST_CASE("resample_audio keeps equal rates, gives ceil(N * new / old) samples and keeps leading dimensions",
          "[audio][data]") {
  const at::Tensor wave = torch::randn({2, 3, 1000}, torch::TensorOptions().dtype(torch::kFloat32));
  CHECK(oml::data::resample_audio(wave, 16000, 16000).equal(wave));
  CHECK(oml::data::resample_audio(wave, 44100, 16000).sizes() == std::vector<int64_t>{2, 3, 363});
  CHECK(oml::data::resample_audio(wave, 8000, 16000).sizes() == std::vector<int64_t>{2, 3, 2000});
  // Up and down by the same factor leaves a band-limited signal (a 440 Hz tone) nearly unchanged.
  const at::Tensor t = torch::arange(8000, torch::kFloat64) / 8000.0;
  const at::Tensor tone = torch::sin(2 * M_PI * 440.0 * t).to(torch::kFloat32).unsqueeze(0);
  const at::Tensor back =
      oml::data::resample_audio(oml::data::resample_audio(tone, 8000, 16000), 16000, 8000);
  CHECK(max_abs_diff(back.narrow(1, 200, 7600), tone.narrow(1, 200, 7600)) < 1e-2);
  CHECK_THROWS_AS(oml::data::resample_audio(wave, 0, 16000), oml::UsageError);
}

TEST_CASE("downmix_to_mono averages the channels", "[audio][data]") {
  const at::Tensor stereo = torch::tensor({{1.0F, 2.0F, 3.0F}, {3.0F, 0.0F, -3.0F}});
  CHECK(oml::data::downmix_to_mono(stereo).equal(torch::tensor({{2.0F, 1.0F, 0.0F}})));
  const at::Tensor mono = stereo.narrow(0, 0, 1);
  CHECK(oml::data::downmix_to_mono(mono).equal(mono));
  CHECK_THROWS_AS(oml::data::downmix_to_mono(torch::zeros({4})), oml::UsageError);
}

TEST_CASE("read_audio names the file of a missing, empty, non-audio, sample-less or truncated file",
          "[audio][data]") {
  TempDir dir;
  const auto message_of = [](const fs::path& file) {
    try {
      (void)oml::data::read_audio(file);
    } catch (const oml::DataError& e) {
      return std::string(e.what());
    }
    FAIL("no DataError for " << file);
    return std::string();
  };
  CHECK_THAT(message_of(dir / "absent.wav"), Contains("absent.wav") && Contains("does not exist"));
  oml::test::write_file(dir / "empty.wav", "");
  CHECK_THAT(message_of(dir / "empty.wav"), Contains("empty.wav") && Contains("empty (0 bytes)"));
  oml::test::write_file(dir / "text.wav", "label,path\n0,a.wav\n");
  CHECK_THAT(message_of(dir / "text.wav"), Contains("text.wav") && Contains("not an audio file"));
  oml::test::write_file(dir / "silent.wav", wav_bytes(0));
  CHECK_THAT(message_of(dir / "silent.wav"), Contains("silent.wav") && Contains("no samples"));
  // A header that promises more frames than follow: libsndfile reads what is there.
  const std::string whole = wav_bytes(100);
  oml::test::write_file(dir / "cut.wav", whole.substr(0, whole.size() - 60));
  CHECK(oml::data::read_audio(dir / "cut.wav").frames() == 70);
  // The bytes decode the same from memory as from the file.
  oml::test::write_file(dir / "ok.wav", whole);
  const auto from_file = oml::data::read_audio(dir / "ok.wav");
  const auto from_memory = oml::data::decode_audio(whole, "bytes");
  CHECK(from_file.samples.equal(from_memory.samples));
  CHECK(from_file.sample_rate == 16000);
  CHECK(from_file.samples[0][1].item<float>() == -2000.0F / 32768.0F);  // exact: PCM / 2^15
}

TEST_CASE("An audio dataframe's start_time column: seconds, an empty cell 0, anything else a DataError",
          "[audio][data]") {
  TempDir dir;
  const Dataframe df = audio_dataframe(dir.path(),
                                       "label,path,split,is_query,is_gallery,start_time\n"
                                       "0,a.wav,train,,,0.5\n"
                                       "0,b.wav,train,,,\n"
                                       "1,c.flac,validation,True,True,12\n");
  CHECK(df.train().start_times == std::vector<double>{0.5, 0.0});
  CHECK(df.validation().start_times == std::vector<double>{12.0});
  CHECK_FALSE(audio_dataframe(dir.path(), "label,path,split,is_query,is_gallery\n0,a.wav,train,,\n")
                  .train()
                  .has_start_times());
  // The largest start is 1e9 s, so that start_time * sample_rate is an exact frame count.
  for (const std::string bad : {"-1", "abc", "nan", "1s", "1e300", "1.5e9"}) {
    INFO(bad);
    try {
      (void)audio_dataframe(dir.path(),
                            "label,path,split,is_query,is_gallery,start_time\n0,a.wav,train,,," + bad + "\n");
      FAIL("accepted start_time " << bad);
    } catch (const oml::DataError& e) {
      CHECK_THAT(e.what(), Contains("df.csv:2: column 'start_time': got '" + bad + "'"));
    }
  }
  // keep_first cuts the column with the others.
  oml::data::DataSplit train = df.train();
  train.keep_first(1);
  CHECK(train.start_times == std::vector<double>{0.5});
}

TEST_CASE("AudioDataset gives OML's AudioLabeledDataset and AudioQueryGalleryLabeledDataset items",
          "[audio][data][pytorch]") {
  const fs::path& dir = oml::test::reference_export("audio_reference.py", "dataset");
  const Dataframe df = audio_dataframe(dir, oml::test::read_file(dir / "df.csv"), /*check_files=*/true);
  const AudioDataset train(df.train(), AudioDatasetOptions{});
  const AudioDataset validation(df.validation(), AudioDatasetOptions{});
  CHECK(train.num_frames() == 48000);
  for (const auto& [dataset, file] : std::vector<std::pair<const AudioDataset*, std::string>>{
           {&train, "train_items.pt"}, {&validation, "val_items.pt"}}) {
    INFO(file);
    const at::Tensor expected = oml::io::load_tensor(dir / file);
    REQUIRE(dataset->size() == expected.size(0));
    std::vector<at::Tensor> items;
    std::vector<int64_t> indices;
    for (int64_t i = 0; i < dataset->size(); ++i) {
      items.push_back(dataset->load(i, {}));
      indices.push_back(i);
      INFO("item " << i);
      CHECK(max_abs_diff(items.back(), expected[i]) <= 1e-4);
    }
    const at::Tensor batch = dataset->collate(items, indices);
    CHECK(batch.sizes() == expected.sizes());
  }
  CHECK(validation.info(2).is_gallery);
  CHECK_FALSE(validation.info(2).is_query);
  CHECK(train.info(2).label == 1);
}

TEST_CASE("AudioDataset: trims and pads as OML, downmixes stereo, and names the row of a bad path or start",
          "[audio][data]") {
  TempDir dir;
  oml::test::write_file(dir / "mono.wav", wav_bytes(16000));  // 1 s at 16 kHz
  SECTION("trim_or_pad: a longer file cut at the offset, short pieces padded on the left, O > L refused") {
    const at::Tensor audio = torch::arange(10, torch::kFloat32).unsqueeze(0);
    CHECK(oml::data::trim_or_pad(audio, 2, 4, "x").equal(torch::tensor({{2.0F, 3.0F, 4.0F, 5.0F}})));
    CHECK(oml::data::trim_or_pad(audio, 8, 4, "x").equal(torch::tensor({{0.0F, 0.0F, 8.0F, 9.0F}})));
    // No longer than the segment: the start is ignored and the whole file padded.
    CHECK(oml::data::trim_or_pad(audio, 5, 12, "x").narrow(1, 2, 10).equal(audio));
    CHECK(oml::data::trim_or_pad(audio, 5, 12, "x").narrow(1, 0, 2).abs().sum().item<float>() == 0.0F);
    CHECK_THROWS_WITH(oml::data::trim_or_pad(audio, 11, 4, "df.csv:3"),
                      Contains("df.csv:3") && Contains("frame 11"));
  }
  SECTION("a start past the end of the file names the dataframe's line and the file") {
    const Dataframe df = audio_dataframe(dir.path(),
                                         "label,path,split,is_query,is_gallery,start_time\n"
                                         "0,mono.wav,train,,,0.5\n"
                                         "0,mono.wav,train,,,2.5\n");
    AudioDatasetOptions options;
    options.max_num_seconds = 0.25;
    options.source = "df.csv";
    const AudioDataset dataset(df.train(), options);
    CHECK(dataset.load(0, {}).sizes() == std::vector<int64_t>{1, 4000});
    CHECK(dataset.frame_offset(1) == 40000);
    CHECK_THROWS_WITH(dataset.load(1, {}), Contains("df.csv:3 (") && Contains("column 'start_time'") &&
                                               Contains("mono.wav") && Contains("frame 40000") &&
                                               Contains("16000 frames"));
  }
  SECTION("paths that are not audio files are refused when the dataset is made") {
    const Dataframe df = audio_dataframe(dir.path(),
                                         "label,path,split,is_query,is_gallery\n"
                                         "0,mono.wav,train,,\n"
                                         "0,photo.jpg,train,,\n");
    AudioDatasetOptions options;
    options.source = "df.csv";
    CHECK_THROWS_WITH(AudioDataset(df.train(), options),
                      Contains("df.csv:3: column 'path'") && Contains("photo.jpg") && Contains(".flac"));
  }
  SECTION("without max_num_seconds items are whole files, and unequal ones do not batch") {
    const std::string short_wav = wav_bytes(800);
    oml::test::write_file(dir / "short.WAV", short_wav);  // extensions compare without case
    const Dataframe df = audio_dataframe(dir.path(),
                                         "label,path,split,is_query,is_gallery\n"
                                         "0,mono.wav,train,,\n"
                                         "0,short.WAV,train,,\n");
    AudioDatasetOptions options;
    options.max_num_seconds.reset();
    options.sample_rate = 8000;
    const AudioDataset dataset(df.train(), options);
    const at::Tensor a = dataset.load(0, {});
    const at::Tensor b = dataset.load(1, {});
    CHECK(a.sizes() == std::vector<int64_t>{1, 8000});
    CHECK(b.sizes() == std::vector<int64_t>{1, 400});
    CHECK_THROWS_WITH(dataset.collate({a, b}, {0, 1}), Contains("line 2") && Contains("line 3"));
    CHECK(dataset.collate({a, a}, {0, 0}).sizes() == std::vector<int64_t>{2, 1, 8000});
  }
  SECTION("options out of range are UsageErrors") {
    AudioDatasetOptions options;
    options.sample_rate = 0;
    CHECK_THROWS_AS(oml::data::check_options(options), oml::UsageError);
    options.sample_rate = 16000;
    options.max_num_seconds = 1e-6;
    CHECK_THROWS_AS(oml::data::check_options(options), oml::UsageError);
  }
}

TEST_CASE("AudioDataset averages a stereo file's channels, or keeps them without convert_to_mono",
          "[audio][data][pytorch]") {
  const fs::path& dir = oml::test::audio_signals();
  const Dataframe df =
      audio_dataframe(dir, "label,path,split,is_query,is_gallery\n0,stereo44k.wav,train,,\n");
  AudioDatasetOptions options;
  options.max_num_seconds = 1.0;
  const at::Tensor mono = AudioDataset(df.train(), options).load(0, {});
  const at::Tensor expected = oml::io::load_tensor(dir / "stereo44k_16k.pt").narrow(1, 0, 16000);
  CHECK(mono.sizes() == std::vector<int64_t>{1, 16000});
  CHECK(max_abs_diff(mono, expected) <= 1e-4);
  options.convert_to_mono = false;
  const at::Tensor both = AudioDataset(df.train(), options).load(0, {});
  CHECK(both.sizes() == std::vector<int64_t>{2, 16000});
  CHECK(max_abs_diff(both.mean(0, true), expected) <= 1e-4);
}

TEST_CASE("Decoding bytes from strangers stops at the sample limit and refuses hostile headers",
          "[audio][data][hostile]") {
  // 2 s of 16 kHz stereo: 64000 samples.
  const std::vector<float> stereo(64000, 0.25F);
  const std::string file = oml::test::wav_bytes(stereo, 16000, 2);
  oml::data::AudioDecodeLimits limits;
  limits.setting = "--max-audio-mb";
  limits.max_samples = 64000;
  CHECK(oml::data::decode_audio(file, "request", limits).frames() == 32000);
  limits.max_samples = 40000;
  CHECK_THROWS_AS(oml::data::decode_audio(file, "request", limits), oml::data::AudioTooLong);
  CHECK_THROWS_WITH(oml::data::decode_audio(file, "request", limits),
                    Contains("request: the audio decodes to more than 40000 samples") &&
                        Contains("--max-audio-mb") && Contains("2 channels at 16000 Hz"));
  // A header claiming 600 channels over a few bytes: refused before anything is decoded.
  limits.max_channels = 32;
  const std::string wide = oml::test::wav_bytes(std::vector<float>(1200, 0.1F), 16000, 1, 600);
  CHECK_THROWS_WITH(oml::data::decode_audio(wide, "request", limits),
                    Contains("request: the audio has 600 channels; at most 32"));
  // A rate no recording has, and one whose resampling filter would take gigabytes.
  CHECK_THROWS_WITH(oml::data::decode_audio(oml::test::wav_bytes(stereo, 4000000, 2), "request"),
                    Contains("4000000 Hz; expected at most 768000 Hz"));
  const oml::data::Audio prime = oml::data::decode_audio(oml::test::wav_bytes(stereo, 47999, 2), "request");
  CHECK_THROWS_WITH(oml::data::resample_audio(prime.samples, prime.sample_rate, 16000),
                    Contains("resampling from 47999 Hz to 16000 Hz needs a filter of") &&
                        Contains("convert the file to a common rate"));
  // Common rates stay well within it.
  for (const int64_t rate : {8000, 11025, 22050, 32000, 44100, 48000, 88200, 96000, 192000}) {
    INFO(rate);
    CHECK(oml::data::resample_audio(torch::zeros({1, 64}), rate, 16000).size(1) ==
          (64 * 16000 + rate - 1) / rate);
  }
}

TEST_CASE("Audio at a low rate is refused before it is upsampled past the sample limit",
          "[audio][data][hostile]") {
  // 200 bytes that claim 1 Hz: 3.2 million samples at 16 kHz, 16,000 times what was decoded.
  const std::string slow = oml::test::wav_bytes(std::vector<float>(200, 0.5F), 1, 1);
  const oml::data::AudioHeader header = oml::data::read_audio_header(slow, "request");
  CHECK(header.channels == 1);
  CHECK(header.sample_rate == 1);
  CHECK(oml::data::resampled_frames(200, 1, 16000) == 3200000);
  oml::data::AudioDecodeLimits limits;
  limits.setting = "--max-audio-mb";
  limits.max_samples = 1000000;
  const oml::data::Audio clip = oml::data::decode_audio(slow, "request", limits);
  CHECK(clip.frames() == 200);
  AudioDatasetOptions options;  // 16 kHz
  CHECK_THROWS_AS(oml::data::audio_item(clip, options, 0, "the request's \"audio\"", limits),
                  oml::data::AudioTooLong);
  CHECK_THROWS_WITH(oml::data::audio_item(clip, options, 0, "the request's \"audio\"", limits),
                    Contains("the request's \"audio\": resampled from 1 Hz to 16000 Hz, the audio would hold "
                             "3200000 samples, more than 1000000") &&
                        Contains("--max-audio-mb"));
  // Within the limit it is resampled, then cut to max_num_seconds (3 s).
  limits.max_samples = 4000000;
  CHECK(oml::data::audio_item(clip, options, 0, "request", limits).size(1) == 48000);
  // The header alone refuses what decode_audio refuses.
  limits.max_channels = 32;
  CHECK_THROWS_WITH(
      oml::data::read_audio_header(oml::test::wav_bytes(std::vector<float>(1200, 0.1F), 16000, 1, 600),
                                   "request", limits),
      Contains("request: the audio has 600 channels; at most 32"));
  CHECK_THROWS_WITH(oml::data::read_audio_header("RIFF", "request"), Contains("request: not an audio file"));
  // The filter's memory: none for equal rates, little for common ones, gigabytes for odd ones.
  CHECK(oml::data::resample_filter_bytes(16000, 16000) == 0);
  for (const int64_t rate : {8000, 11025, 22050, 44100, 48000, 96000}) {
    INFO(rate);
    CHECK(oml::data::resample_filter_bytes(rate, 16000) < 16 * 1024 * 1024);
  }
  CHECK(oml::data::resample_filter_bytes(4001, 16000) > int64_t{1} << 30);
  // What a server keeps free beside a clip: the largest of them, 11.025 kHz's to 16 kHz.
  CHECK(oml::data::common_rate_filter_bytes(16000) == oml::data::resample_filter_bytes(11025, 16000));
  CHECK(oml::data::common_rate_filter_bytes(16000) <= 16 * 1024 * 1024);
  CHECK(oml::data::common_rate_filter_bytes(48000) > 0);
}

TEST_CASE("A dataset's file whose resampling filter is too large is named with its dataframe line",
          "[audio][data]") {
  TempDir dir;
  oml::test::write_file(dir / "odd.wav", oml::test::wav_bytes(std::vector<float>(4800, 0.1F), 47999, 1));
  const Dataframe df =
      audio_dataframe(dir.path(), "label,path,split,is_query,is_gallery\n0,odd.wav,train,,\n");
  AudioDatasetOptions options;
  options.source = "df.csv";
  const AudioDataset dataset(df.train(), options);
  CHECK_THROWS_WITH(dataset.load(0, {}), Contains("df.csv:2 (") &&
                                             Contains("odd.wav): resampling from 47999 Hz") &&
                                             Contains("convert the file to a common rate"));
}

TEST_CASE("kaldi_fbank equals torchaudio.compliance.kaldi.fbank for every option torchaudio offers",
          "[audio][models][kaldi]") {
  const fs::path& dir = oml::test::reference_export("audio_reference.py", "kaldi");
  using oml::models::KaldiFbankOptions;
  // The cases of audio_reference.py's KALDI_CASES.
  std::vector<std::pair<std::string, KaldiFbankOptions>> cases;
  cases.emplace_back("defaults", KaldiFbankOptions{});
  KaldiFbankOptions wespeaker;
  wespeaker.num_mel_bins = 80;
  wespeaker.window_type = "hamming";
  wespeaker.energy_floor = 0.0;
  cases.emplace_back("wespeaker", wespeaker);
  KaldiFbankOptions htk;
  htk.num_mel_bins = 40;
  htk.use_energy = true;
  htk.htk_compat = true;
  htk.snip_edges = false;
  htk.window_type = "hanning";
  htk.raw_energy = false;
  htk.subtract_mean = true;
  cases.emplace_back("energy_htk_edges", htk);
  KaldiFbankOptions energy_first;
  energy_first.use_energy = true;
  energy_first.energy_floor = 0.0;
  cases.emplace_back("energy_first", energy_first);
  KaldiFbankOptions linear;
  linear.use_power = false;
  linear.use_log_fbank = false;
  linear.window_type = "blackman";
  linear.preemphasis_coefficient = 0.0;
  linear.remove_dc_offset = false;
  linear.low_freq = 64.0;
  linear.high_freq = -400.0;
  linear.round_to_power_of_two = false;
  cases.emplace_back("linear_magnitude_blackman", linear);
  KaldiFbankOptions rectangular;
  rectangular.sample_frequency = 8000.0;
  rectangular.frame_length_ms = 20.0;
  rectangular.frame_shift_ms = 8.0;
  rectangular.window_type = "rectangular";
  rectangular.num_mel_bins = 15;
  rectangular.snip_edges = false;
  cases.emplace_back("rectangular_8k", rectangular);
  cases.emplace_back("stereo", KaldiFbankOptions{});

  for (const auto& [name, options] : cases) {
    INFO(name);
    const at::Tensor wave = oml::io::load_tensor(dir / ("kaldi_" + name + "_wave.pt"));
    const at::Tensor expected = oml::io::load_tensor(dir / ("kaldi_" + name + ".pt"));
    const at::Tensor features = oml::models::kaldi_fbank(wave, options);
    REQUIRE(features.sizes() == expected.sizes());
    // Log features to 1e-4; linear magnitudes relative to their largest.
    const double scale = options.use_log_fbank ? 1.0 : std::max(1.0, expected.abs().max().item<double>());
    CHECK(max_abs_diff(features, expected) / scale <= 1e-4);
  }

  KaldiFbankOptions bad;
  bad.num_mel_bins = 3;
  CHECK_THROWS_WITH(oml::models::kaldi_fbank(torch::zeros({1000}), bad),
                    Contains("num_mel_bins must be > 3"));
  bad = {};
  bad.window_type = "gauss";
  CHECK_THROWS_WITH(oml::models::check_options(bad), Contains("window_type 'gauss'"));
  bad = {};
  bad.high_freq = 9000.0;
  CHECK_THROWS_WITH(oml::models::check_options(bad), Contains("<= 8000"));
  CHECK_THROWS_WITH(oml::models::kaldi_fbank(torch::zeros({300})),
                    Contains("shorter than one frame (400 samples)"));
  CHECK_THROWS_WITH(oml::models::kaldi_fbank(torch::zeros({1000}, torch::kLong)), Contains("float waveform"));
}

}  // namespace audio_tests
