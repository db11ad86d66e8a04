// Audio through the extractor pipelines, as a user runs them: oml-train, oml-validate and
// oml-predict with `extractor: {name: ecapa_tdnn, ...}` (random weights) on an audio dataframe of
// WAV files at two rates, mono and stereo, one file giving two rows by `start_time`; and the
// mistakes a user meets (a sample rate that is not the model's, image settings in an audio run,
// `audio:` in an image run, a file that is not audio, whole files of different lengths).
// Indexing, searching and serving audio: audio_serving_tests.cpp.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "integration/audio_run_fixtures.h"
#include "integration/serving_fixtures.h"
#include "oml/io/npy.h"
#include "support/support.h"

namespace audio_pipeline_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// A predict config over the run's checkpoint, writing into `save_dir`.
fs::path write_predict_config(const TempDir& dir, const std::string& name, const fs::path& weights,
                              const fs::path& save_dir) {
  write_file(dir / name, audio_validate_config(dir, weights) + "save_dir: " + save_dir.string() +
                             "\nbatch_size_inference: 5\n");
  return dir / name;
}

}  // namespace

TEST_CASE("An ECAPA-TDNN trains on an audio dataframe, and its checkpoint validates and predicts as trained",
          "[pipelines][integration][audio]") {
  TempDir dir;
  write_audio_run(dir);
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()), 900);
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  CHECK_THAT(
      train.out + train.err,
      Contains("resampled to 16000 Hz, downmixed to mono, cut or left-padded to 1 s") && Contains("clip/s"));
  const fs::path run = dir / "logs" / "run";
  // 1 epoch x 2 batches of 2 speakers x 2 clips.
  const auto steps = read_jsonl(run / "train.jsonl");
  REQUIRE(steps.size() == 2);
  for (const auto& step : steps) {
    INFO(step.dump());
    CHECK(std::isfinite(step.at("loss").get<double>()));
  }
  const auto validations = read_jsonl(run / "metrics.jsonl");
  REQUIRE(validations.size() == 1);
  const auto metrics = validations[0].at("metrics").get<std::map<std::string, double>>();
  REQUIRE(metrics.count("OVERALL/cmc/1") == 1);

  // oml-validate reproduces the checkpoint's metrics, in batches of another size.
  const fs::path best = run / "checkpoints" / "best.ckpt";
  write_file(dir / "validate.yaml", audio_validate_config(dir, best));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()), 600);
  INFO(validate.out << validate.err);
  REQUIRE(validate.exit_code == 0);
  check_same_metrics(best_metrics(run), metrics_json(dir / "logs" / "validation" / "metrics.json"));

  // oml-predict embeds every row in file order (speaker 0's long take twice, from 0 s and 1.2 s) ...
  const fs::path config = write_predict_config(dir, "predict.yaml", best, dir / "pred");
  const auto predict = run_oml("oml-predict", "--config " + quote(config.string()), 600);
  INFO(predict.out << predict.err);
  REQUIRE(predict.exit_code == 0);
  const at::Tensor rows = oml::io::read_npy_matrix(dir / "pred" / "embeddings.npy");
  REQUIRE(rows.size(0) == 4 * 4 + 1 + 2 * 3);
  REQUIRE(rows.size(1) == 192);
  const auto csv = csv_rows(dir / "pred" / "embeddings.csv");
  REQUIRE(csv.size() == 24);
  CHECK(csv[0] == std::vector<std::string>{"index", "path"});
  CHECK(csv[4][1] == (dir / "data" / "speaker0" / "take3_22k.wav").string());
  CHECK(csv[5][1] == csv[4][1]);
  CHECK(max_abs_diff(rows[3], rows[4]) > 1e-3);  // two segments of one file, two embeddings

  // ... and a folder of audio files alike: each file once, in sorted path order, from its start.
  const auto folder =
      run_oml("oml-predict",
              "--config " + quote(config.string()) + " --set data_dir=" + quote((dir / "data").string()) +
                  " --set save_dir=" + quote((dir / "folder").string()),
              600);
  INFO(folder.out << folder.err);
  REQUIRE(folder.exit_code == 0);
  const at::Tensor files = oml::io::read_npy_matrix(dir / "folder" / "embeddings.npy");
  const auto file_rows = csv_rows(dir / "folder" / "embeddings.csv");
  REQUIRE(files.size(0) == 22);
  std::map<std::string, int64_t> file_index;
  for (std::size_t i = 1; i < file_rows.size(); ++i)
    file_index[file_rows[i][1]] = static_cast<int64_t>(i) - 1;
  for (std::size_t row = 1; row < csv.size(); ++row) {
    if (row == 5) continue;  // the segment from 1.2 s: no file gives it
    INFO(csv[row][1]);
    REQUIRE(file_index.count(csv[row][1]) == 1);
    CHECK(max_abs_diff(rows[static_cast<int64_t>(row) - 1], files[file_index.at(csv[row][1])]) < 1e-4);
  }
}

TEST_CASE("Audio runs refuse what they cannot honour, naming the key or the file",
          "[pipelines][integration][audio]") {
  TempDir dir;
  write_audio_run(dir);
  const std::string config = "--config " + quote((dir / "train.yaml").string());

  SECTION("a sample rate that is not the model's") {
    const auto r = run_oml("oml-train", config + " --set audio.sample_rate=22050");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("audio.sample_rate: 22050 Hz, but extractor 'ecapa_tdnn' reads waveforms "
                               "sampled at 16000 Hz"));
  }
  SECTION("an image transform") {
    const auto r = run_oml("oml-train", config + " --set " + quote("transforms_train={name: norm}"));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("'transforms_train' is an image setting, and this run reads audio"));
  }
  SECTION("`audio:` in a run that reads images") {
    const auto r = run_oml("oml-train", config + " --set " +
                                            quote("extractor={name: conv_net, args: {channels: [8, 16], "
                                                  "feat_dim: 8}}") +
                                            " --set " + quote("transforms_train={name: norm}"));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("'audio' says how audio files become items, and this run reads images"));
  }
  SECTION("a negative duration") {
    const auto r = run_oml("oml-train", config + " --set audio.max_num_seconds=-1");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("max_num_seconds") && Contains("0 for whole files"));
  }
  SECTION("a text dataframe") {
    write_file(
        dir / "texts" / "df.csv",
        "label,text,split,is_query,is_gallery\n0,hello,train,,\n0,hi,train,,\n1,yes,train,,\n1,no,train,,\n");
    const auto r = run_oml("oml-train", config + " --set dataset_root=" + quote((dir / "texts").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("extractor 'ecapa_tdnn' reads audio") && Contains("is a text dataframe"));
  }
  SECTION("a file that is not audio") {
    write_file(dir / "data" / "speaker1" / "take0.wav", "RIFF....WAVEnot really");
    const auto r = run_oml("oml-train", config, 600);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains((dir / "data" / "speaker1" / "take0.wav").string()));
    CHECK_THAT(r.err, !Contains("terminate"));
  }
  SECTION("whole files of different lengths cannot batch") {
    const auto r = run_oml("oml-train", config + " --set audio.max_num_seconds=0", 600);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("cannot batch audio of different sizes") && Contains("df.csv"));
  }
  SECTION("a validation grid, which draws images") {
    write_file(dir / "validate.yaml", audio_validate_config(dir, ""));
    const auto r = run_oml("oml-validate",
                           "--config " + quote((dir / "validate.yaml").string()) + " --visualize 2", 600);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("this dataframe holds audio"));
  }
}

}  // namespace audio_pipeline_tests
