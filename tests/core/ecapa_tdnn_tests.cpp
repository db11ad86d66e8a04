// ecapa_tdnn against OML 4.0's ECAPATDNNExtractor: its front end (pre-emphasis, torchaudio's
// MelSpectrogram, log, mean removal) on speech-like signals, and its embeddings from a state dict
// OML's Python saved (torch.save(extractor.state_dict())) and from the same weights in
// TaoRuijie's published layout. tests/python/audio_reference.py builds OML's extractor with random
// weights (fixed seeds; nothing downloaded).
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/audio_reference.h"
#include "core/extractor_yaml.h"
#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/data/audio.h"
#include "oml/data/dataframe.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/ecapa_tdnn.h"
#include "oml/models/mel_spectrogram.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"
#include "runtime/run_inputs.h"
#include "shell/components.h"
#include "support/config_errors.h"
#include "support/support.h"

namespace ecapa_tdnn_tests {

using Catch::Matchers::Contains;
using oml::test::max_abs_diff;
using oml::test::TempDir;
namespace fs = std::filesystem;

using oml::test::extractor_from_yaml;
using oml::test::parse_errors;

namespace {

oml::models::ECAPATDNN make_ecapa(const std::string& weights = "", bool normalise_features = false) {
  oml::models::ECAPATDNNOptions options;
  options.weights = weights;
  options.normalise_features = normalise_features;
  oml::models::ECAPATDNN model(options);
  model->eval();
  return model;
}

}  // namespace

TEST_CASE("ECAPA's front end gives OML's log-mel features of speech-like signals to 1e-4",
          "[audio][models][ecapa_tdnn][pytorch]") {
  const fs::path& dir = oml::test::audio_signals();
  const oml::models::MelSpectrogramOptions mel;
  // The buffers a fresh model starts with are torchaudio's. The filterbank is float32 arithmetic on
  // frequencies up to 8 kHz divided by bands ~20 Hz wide, so one ulp of a frequency (5e-4 Hz) moves a
  // weight by ~2.5e-5: LibTorch 1.13's float32 pow differs from 2.11's by that much (9.7e-6 seen).
  CHECK(max_abs_diff(
            oml::models::melscale_fbanks(mel.n_freqs(), mel.f_min, mel.f_max, mel.n_mels, mel.sample_rate),
            oml::io::load_tensor(dir / "mel_fb.pt")) <= 5e-5);
  CHECK(max_abs_diff(torch::hamming_window(mel.win_length), oml::io::load_tensor(dir / "mel_window.pt")) <=
        1e-7);

  torch::NoGradGuard no_grad;
  auto model = make_ecapa();
  for (const std::string name : {"mono16k", "stereo44k", "mono22k_flac", "mono8k_float", "stereo48k_flac"}) {
    INFO(name);
    // The same 16 kHz waveform as the reference's input, so that only the features are compared.
    const at::Tensor wave = oml::io::load_tensor(dir / (name + "_16k.pt"));
    const at::Tensor expected = oml::io::load_tensor(dir / (name + "_fbank.pt"));
    const at::Tensor features = model->features(wave);
    REQUIRE(features.sizes() == expected.sizes());
    CHECK(features.size(1) == 80);
    CHECK(features.size(2) == 1 + wave.size(1) / 160);
    CHECK(max_abs_diff(features, expected) <= 1e-4);
  }
}

TEST_CASE("ecapa_tdnn gives OML's embeddings from OML's state dict, from TaoRuijie's layout and by config",
          "[audio][models][ecapa_tdnn][pytorch]") {
  oml::cli::register_builtins();
  const fs::path& dir = oml::test::reference_export("audio_reference.py", "ecapa");
  torch::NoGradGuard no_grad;
  const at::Tensor waves = oml::io::load_tensor(dir / "ecapa_input.pt");
  const at::Tensor expected = oml::io::load_tensor(dir / "ecapa_expected.pt");
  for (const std::string file : {"ecapa_oml.pth", "ecapa_taoruijie.pth"}) {
    INFO(file);
    auto model = make_ecapa((dir / file).string());
    const at::Tensor embeddings = model->forward(waves);
    REQUIRE(embeddings.sizes() == expected.sizes());
    CHECK(max_abs_diff(embeddings, expected) <= 1e-4);
    // [B, N] is the same input as [B, 1, N].
    CHECK(max_abs_diff(model->forward(waves.squeeze(1)), expected) <= 1e-4);
  }
  auto normalised = make_ecapa((dir / "ecapa_oml.pth").string(), /*normalise_features=*/true);
  CHECK(max_abs_diff(normalised->forward(waves),
                     oml::io::load_tensor(dir / "ecapa_expected_normalised.pt")) <= 1e-4);

  const auto configured = extractor_from_yaml(
      "{name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie, weights: " + (dir / "ecapa_oml.pth").string() +
      "}}");
  CHECK(configured->input() == oml::models::ExtractorInput::audio);
  CHECK(configured->feat_dim() == 192);
  CHECK(max_abs_diff(configured->forward(waves), expected) <= 1e-4);

  // Every name of OML's state dict is the model's, under OML's `model.` attribute.
  const auto file =
      oml::io::find_state_dict(oml::io::read_torch_file(dir / "ecapa_oml.pth"), "ecapa_oml.pth");
  const auto own = oml::io::state_dict(*make_ecapa());
  CHECK(own.size() == file.size());
  for (const auto& [name, tensor] : own) {
    INFO(name);
    CHECK(file.count("model." + name) == 1);
  }
}

TEST_CASE("ecapa_tdnn: OML's config parses, wrong args and inputs are named",
          "[audio][models][ecapa_tdnn][registry]") {
  oml::cli::register_builtins();
  CHECK(parse_errors("{name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie, weights: null, "
                     "normalise_features: False}}")
            .empty());
  const auto missing = parse_errors("{name: ecapa_tdnn, args: {weights: null}}");
  REQUIRE(missing.size() == 1);
  CHECK_THROWS_WITH(missing.throw_if_any(), Contains("arch"));
  const auto unknown = parse_errors("{name: ecapa_tdnn, args: {arch: ecapa_tdnn_big}}");
  REQUIRE(unknown.size() == 1);
  CHECK_THROWS_WITH(unknown.throw_if_any(), Contains("ecapa_tdnn_big") && Contains("ecapa_tdnn_taoruijie"));
  // A zoo name of another extractor.
  CHECK(parse_errors("{name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie, weights: vits16_dino}}").size() ==
        1);

  // The zoo name is looked up in the weights folder, never downloaded.
  TempDir dir;
  oml::models::set_weights_dir(dir.path());
  try {
    (void)make_ecapa("ecapa_tdnn_taoruijie");
    FAIL("a missing zoo file loaded");
  } catch (const oml::DataError& e) {
    CHECK_THAT(oml::test::error_text(e),
               Contains("ecapa_tdnn_taoruijie.pth") && Contains("TaoRuijie/ECAPA-TDNN"));
  }
  oml::models::set_weights_dir("");

  torch::NoGradGuard no_grad;
  auto model = make_ecapa();
  CHECK_THROWS_WITH(model->forward(torch::zeros({2, 3, 16000})), Contains("[batch, 1, samples]"));
  CHECK_THROWS_WITH(model->forward(torch::zeros({2, 200})), Contains("200 samples are too few"));
  CHECK(model->forward(torch::randn({1, 257})).sizes() == std::vector<int64_t>{1, 192});

  // Nested in extractor_with_mlp, the network sits under OML's `extractor.model.`, and the input
  // kind is the backbone's.
  const auto mlp = extractor_from_yaml(
      "{name: extractor_with_mlp, args: {extractor: {name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie}}, "
      "mlp_features: [32]}}");
  CHECK(mlp->input() == oml::models::ExtractorInput::audio);
  CHECK(oml::io::state_dict(*mlp).count("extractor.model.layer1.convs.6.weight") == 1);
  CHECK(mlp->forward(torch::randn({2, 1, 8000})).sizes() == std::vector<int64_t>{2, 32});
}

TEST_CASE("ecapa_tdnn trains: gradients reach its parameters, none the front end's buffers",
          "[audio][models][ecapa_tdnn]") {
  auto model = make_ecapa();
  model->train();
  const at::Tensor waves = torch::randn({3, 1, 4000}) * 0.1;
  const at::Tensor embeddings = model->forward(waves);
  embeddings.pow(2).sum().backward();
  for (const auto& parameter : model->named_parameters()) {
    INFO(parameter.key());
    REQUIRE(parameter.value().grad().defined());
    // The attention's last bias shifts every frame's score of a channel alike, which the softmax
    // over time cancels: its gradient is zero in the network as written.
    if (parameter.key() == "attention.4.bias") continue;
    CHECK(parameter.value().grad().abs().sum().item<double>() > 0.0);
  }
  for (const auto& buffer : model->named_buffers()) CHECK_FALSE(buffer.value().requires_grad());
}

TEST_CASE("The pipelines feed an audio extractor audio items cut as `audio:` says, at its sample rate",
          "[audio][models][ecapa_tdnn][config]") {
  oml::cli::register_builtins();
  const std::string extractor = "extractor: {name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie}}\n";
  auto model = make_ecapa();
  const auto dataframe = oml::data::Dataframe::parse(
      "label,path,split,is_query,is_gallery\n0,a.wav,validation,True,True\n", "df.csv",
      oml::data::DataframeOptions{.dataset_root = {}, .check_files = false});

  // OML's constants by default; `audio:` sets them.
  const auto defaults = oml::pipelines::run_inputs(oml::test::parse_run_config_text(extractor, "audio.yaml"),
                                                   *model, dataframe, {});
  CHECK(defaults.kind == oml::pipelines::RowInput::audio);
  CHECK(defaults.unit() == "clip");
  REQUIRE(defaults.audio);
  CHECK(defaults.audio->sample_rate == 16000);
  CHECK(defaults.audio->max_num_seconds == 3.0);
  CHECK(defaults.audio->convert_to_mono);
  const auto whole = oml::pipelines::run_inputs(
      oml::test::parse_run_config_text(extractor + "audio: {max_num_seconds: 0, convert_to_mono: false}\n",
                                       "audio.yaml"),
      *model, dataframe, {});
  REQUIRE(whole.audio);
  CHECK_FALSE(whole.audio->max_num_seconds.has_value());
  CHECK_FALSE(whole.audio->convert_to_mono);

  // The model's front end is for 16 kHz: another rate is refused at its key.
  const oml::config::RunConfig other_rate =
      oml::test::parse_run_config_text(extractor + "audio: {sample_rate: 8000}\n", "audio.yaml");
  CHECK_THROWS_WITH(
      oml::pipelines::run_inputs(other_rate, *model, dataframe, {}),
      Contains("audio.yaml:2") && Contains("8000 Hz, but extractor 'ecapa_tdnn' reads waveforms "
                                           "sampled at 16000 Hz"));
  // Image settings, and the commands that read texts or images only.
  const oml::config::RunConfig with_transform = oml::test::parse_run_config_text(
      extractor + "transforms_val: {name: norm_resize_torch, args: {im_size: 32}}\n", "audio.yaml");
  CHECK_THROWS_WITH(oml::pipelines::run_inputs(with_transform, *model, dataframe, {"transforms_val"}),
                    Contains("audio.yaml:2") && Contains("'transforms_val' is an image setting, and this run "
                                                         "reads audio"));
  const oml::config::RunConfig config = oml::test::parse_run_config_text(extractor, "audio.yaml");
  CHECK_THROWS_WITH(oml::pipelines::text_inputs(config, *model, "texts.txt", {}), Contains("reads audio"));
  CHECK_THROWS_WITH(oml::pipelines::require_image_extractor(config, *model, "the pairwise pipeline"),
                    Contains("reads audio"));
  for (const char* wrong : {"audio: {sample_rate: 0}", "audio: {max_num_seconds: -1}", "audio: {rate: 1}"}) {
    INFO(wrong);
    CHECK_THROWS_AS(oml::test::parse_run_config_text(extractor + wrong + "\n", "audio.yaml"),
                    oml::ConfigError);
  }
}

}  // namespace ecapa_tdnn_tests
