// vit_clip against OML's ViTCLIPExtractor: tests/python/vit_clip_reference.py carries OML's network
// (CLIP's VisionTransformer with torch.nn.MultiheadAttention) and OML's way of reading weights, so
// that
// - random weights in every form OML reads (a plain state dict, OML's Lightning checkpoint, a
//   whole CLIP state dict with its text tower, OpenAI's float16 TorchScript archive) give OML's
//   embeddings in oml-cpp, and
// - a checkpoint written by oml-cpp loads into OML's model the way ViTCLIPExtractor(weights=...)
//   reads it and gives the same embeddings.
// Plus the names, the zoo and the mistakes a user can make.
#include <torch/torch.h>

#include <fstream>

#include "core/extractor_yaml.h"
#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/io/torchscript.h"
#include "oml/models/vit_clip.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace vit_clip_tests {

using Catch::Matchers::Contains;
using oml::test::error_text;
using oml::test::max_abs_diff;
using oml::test::TempDir;
namespace fs = std::filesystem;

using oml::test::extractor_from_yaml;
using oml::test::parse_errors;

namespace {

// vit_clip_reference.py's export of `arch` in `forms` (read-only).
const fs::path& exported(const std::string& arch, const std::string& forms = "all") {
  return oml::test::reference_export("vit_clip_reference.py", "export", {arch, forms});
}

oml::models::ViTClip make_clip(const std::string& arch, const std::string& weights = "",
                               bool normalise_features = false) {
  oml::models::ViTClipOptions options;
  options.arch = arch;
  options.weights = weights;
  options.normalise_features = normalise_features;
  oml::models::ViTClip model(options);
  model->eval();
  return model;
}

// OML's embeddings of the exported batch, from each weights file of the export.
void check_against_oml(const fs::path& dir, const std::string& arch, const std::vector<std::string>& files) {
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / (arch + "_input.pt"));
  for (const auto& file : files) {
    INFO(file);
    const bool jit = file.find("_jit") != std::string::npos;
    CHECK(oml::io::is_torchscript_archive(dir / file) == jit);
    const auto expected = oml::io::load_tensor(dir / (arch + (jit ? "_jit_expected.pt" : "_expected.pt")));
    const auto embeddings = make_clip(arch, (dir / file).string())->forward(images);
    REQUIRE(embeddings.sizes() == expected.sizes());
    CHECK(max_abs_diff(embeddings, expected) <= 1e-4);
  }
}

}  // namespace

TEST_CASE(
    "CLIP ViT-B/32 gives OML's embeddings from a state dict, OML's Lightning checkpoint, a whole CLIP "
    "state dict and OpenAI's float16 TorchScript archive",
    "[models][vit_clip][pytorch]") {
  const fs::path& dir = exported("vitb32_224");
  check_against_oml(
      dir, "vitb32_224",
      {"vitb32_224.pth", "vitb32_224_lightning.ckpt", "vitb32_224_clip.pth", "vitb32_224_jit.pt"});

  // The names are OML's: exactly the keys of the Python model's state dict.
  const auto python_names = oml::io::find_state_dict(oml::io::read_torch_file(dir / "vitb32_224.pth"), "pth");
  const auto names = oml::io::state_dict(*make_clip("vitb32_224"));
  REQUIRE(names.size() == python_names.size());
  for (const auto& [name, tensor] : python_names) {
    INFO(name);
    REQUIRE(names.count(name) == 1);
    CHECK(names.at(name).sizes() == tensor.sizes());
  }

  // normalise_features (OML's default) divides by the L2 norm.
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / "vitb32_224_input.pt");
  const auto normalised = make_clip("vitb32_224", (dir / "vitb32_224.pth").string(), true)->forward(images);
  CHECK(max_abs_diff(normalised, oml::io::load_tensor(dir / "vitb32_224_expected_normalised.pt")) <= 1e-5);

  // OpenAI's file by its zoo name: TorchScript found by its content, whatever the file is called.
  TempDir zoo_dir;
  fs::create_symlink(dir / "vitb32_224_jit.pt", zoo_dir / "openai_vitb32_224.ckpt");
  oml::models::set_weights_dir(zoo_dir.path());
  const auto zoo = make_clip("vitb32_224", "openai_vitb32_224")->forward(images);
  oml::models::set_weights_dir("");
  CHECK(max_abs_diff(zoo, oml::io::load_tensor(dir / "vitb32_224_jit_expected.pt")) <= 1e-4);
}

TEST_CASE("CLIP ViT-B/16 gives OML's embeddings from a state dict and OpenAI's TorchScript archive",
          "[models][vit_clip][pytorch]") {
  check_against_oml(exported("vitb16_224", "some"), "vitb16_224", {"vitb16_224.pth", "vitb16_224_jit.pt"});
}

TEST_CASE("An oml-cpp vit_clip checkpoint loads into OML's ViTCLIPExtractor and gives the same embeddings",
          "[models][vit_clip][pytorch]") {
  TempDir dir;
  torch::manual_seed(11);
  auto model = make_clip("vitb32_224");
  model->train();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  sgd.zero_grad();
  model->forward(torch::randn({2, 3, 224, 224})).pow(2).mean().backward();
  sgd.step();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto images = torch::randn({2, 3, 224, 224});
  oml::io::save_tensor(dir / "vitb32_224_input.pt", images);
  oml::io::save_tensor(dir / "oml_vitb32_224_out.pt", model->forward(images));
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = oml::io::state_dict(*model);
  ckpt.epoch = 1;
  ckpt.step = 1;
  ckpt.config = "extractor: {name: vit_clip, args: {arch: vitb32_224}}\n";
  oml::io::save_checkpoint(dir / "oml_vitb32_224.ckpt", ckpt);
  oml::test::run_reference("vit_clip_reference.py", "check", dir.path(), {"vitb32_224"});
}

TEST_CASE("vit_clip's archs have CLIP's shapes, and an unknown arch lists the known ones",
          "[models][vit_clip]") {
  const auto b16 = oml::io::state_dict(*make_clip("vitb16_224"));
  CHECK(b16.at("conv1.weight").sizes() == torch::IntArrayRef({768, 3, 16, 16}));
  CHECK(b16.count("conv1.bias") == 0);
  CHECK(b16.at("positional_embedding").sizes() == torch::IntArrayRef({197, 768}));
  CHECK(b16.at("class_embedding").sizes() == torch::IntArrayRef({768}));
  CHECK(b16.at("transformer.resblocks.11.attn.in_proj_weight").sizes() == torch::IntArrayRef({2304, 768}));
  CHECK(b16.at("transformer.resblocks.11.attn.out_proj.bias").sizes() == torch::IntArrayRef({768}));
  CHECK(b16.at("transformer.resblocks.0.mlp.c_fc.weight").sizes() == torch::IntArrayRef({3072, 768}));
  CHECK(b16.at("proj").sizes() == torch::IntArrayRef({768, 512}));
  CHECK(b16.size() == 5 + 12 * 12 + 3);
  CHECK(make_clip("vitb16_224")->feat_dim() == 512);
  CHECK(make_clip("vitb32_224")->oml_module_attribute() == "visual");

  const auto l336 = oml::models::vit_clip_arch("vitl14_336");
  CHECK(l336.width == 1024);
  CHECK(l336.layers == 24);
  CHECK(l336.output_dim == 768);
  CHECK(l336.input_resolution == 336);
  CHECK(oml::models::vit_clip_arch_names() ==
        std::vector<std::string>{"vitb16_224", "vitb32_224", "vitl14_224", "vitl14_336"});
  CHECK_THROWS_WITH(make_clip("vitb16"), Contains("unknown arch 'vitb16'") && Contains("vitb16_224"));
}

TEST_CASE("vit_clip's fused inference attention and its training path give the same embeddings",
          "[models][vit_clip]") {
  torch::manual_seed(3);
  auto model = make_clip("vitb32_224");
  const auto images = torch::randn({2, 3, 224, 224});
  const auto with_autograd = model->forward(images);
  torch::NoGradGuard no_grad;
  CHECK(max_abs_diff(model->forward(images), with_autograd.detach()) <= 1e-5);
}

TEST_CASE("vit_clip refuses another image size, as OML does, naming the size it takes",
          "[models][vit_clip]") {
  auto model = make_clip("vitb32_224");
  torch::NoGradGuard no_grad;
  CHECK_THROWS_AS(model->forward(torch::randn({1, 3, 192, 224})), oml::DataError);
  CHECK_THROWS_WITH(
      model->forward(torch::randn({1, 3, 192, 224})),
      Contains("vitb32_224 takes images of 224x224 px, got 192x224") && Contains("norm_resize_albu_clip"));
}

TEST_CASE(
    "ViT-B/16 weights into vit_clip ViT-B/32 name the mismatching keys, both shapes and the file's arch",
    "[models][vit_clip][io]") {
  TempDir dir;
  oml::test::write_state_dict_file(dir / "b16.pth", *make_clip("vitb16_224"));
  try {
    make_clip("vitb32_224", (dir / "b16.pth").string());
    FAIL("no error");
  } catch (const oml::DataError& e) {
    const std::string text = error_text(e);
    CHECK_THAT(text, Contains("b16.pth") &&
                         Contains("conv1.weight (file [768, 3, 16, 16], model [768, 3, 32, 32])"));
    CHECK_THAT(text, Contains("the file holds vitb16_224 weights, the model is arch vitb32_224"));
  }

  // A file of another model: nothing of CLIP's in it, the whole report.
  oml::test::write_state_dict_file(dir / "linear.pth", *torch::nn::Linear(3, 4));
  try {
    make_clip("vitb32_224", (dir / "linear.pth").string());
    FAIL("no error");
  } catch (const oml::DataError& e) {
    CHECK_THAT(error_text(e), Contains("linear.pth") && Contains("missing in the file: class_embedding") &&
                                  Contains("unexpected in the file: bias, weight"));
  }

  // A truncated archive, and text.
  oml::io::save_tensor(dir / "whole.pt", torch::randn({64, 64}));
  const std::string bytes = oml::test::read_file(dir / "whole.pt");
  oml::test::write_file(dir / "truncated.pt", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(make_clip("vitb32_224", (dir / "truncated.pt").string()), oml::DataError);
  CHECK_THROWS_WITH(make_clip("vitb32_224", (dir / "truncated.pt").string()), Contains("truncated.pt"));
  oml::test::write_file(dir / "notes.pt", "not weights\n");
  CHECK_THROWS_WITH(make_clip("vitb32_224", (dir / "notes.pt").string()), Contains("notes.pt"));
  CHECK_FALSE(oml::io::is_torchscript_archive(dir / "notes.pt"));
}

TEST_CASE("A TorchScript archive without a visual submodule, or damaged, is a data error naming the file",
          "[models][vit_clip][io]") {
  TempDir dir;
  // LibTorch writes TorchScript archives too: an optimizer's state is one.
  torch::nn::Linear linear(3, 4);
  torch::optim::SGD sgd(linear->parameters(), torch::optim::SGDOptions(0.1));
  torch::save(sgd, (dir / "sgd.pt").string());
  REQUIRE(oml::io::is_torchscript_archive(dir / "sgd.pt"));
  CHECK_THROWS_WITH(make_clip("vitb32_224", (dir / "sgd.pt").string()),
                    Contains("sgd.pt") && Contains("no submodule 'visual'"));

  // One flipped byte in the middle of the (stored, uncompressed) constants.pkl record: the zip
  // layer reads it as before, the CRC-32 of the zip directory tells.
  std::string archive = oml::test::read_file(dir / "sgd.pt");
  std::string constants;
  for (const auto& [name, content] : oml::test::read_zip_records(archive)) {
    if (name.size() >= 13 && name.compare(name.size() - 13, 13, "constants.pkl") == 0) constants = content;
  }
  REQUIRE(constants.size() > 2);
  const auto at = archive.find(constants);
  REQUIRE(at != std::string::npos);
  archive[at + constants.size() / 2] = static_cast<char>(archive[at + constants.size() / 2] ^ 0x5a);
  oml::test::write_file(dir / "damaged.pt", archive);
  CHECK_THROWS_AS(make_clip("vitb32_224", (dir / "damaged.pt").string()), oml::DataError);
  CHECK_THROWS_WITH(make_clip("vitb32_224", (dir / "damaged.pt").string()),
                    Contains("damaged.pt") && Contains("constants.pkl' is damaged"));
}

TEST_CASE(
    "vit_clip zoo names: OML's file names in the weights folder, the URL when missing, the arch checked",
    "[models][vit_clip][zoo]") {
  TempDir dir;
  oml::models::set_weights_dir(dir.path());
  try {
    make_clip("vitb16_224", "openai_vitb16_224");
    FAIL("no error");
  } catch (const oml::DataError& e) {
    CHECK_THAT(error_text(e), Contains((dir / "openai_vitb16_224.ckpt").string()) &&
                                  Contains("https://openaipublic.azureedge.net/clip/models/"
                                           "5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f/"
                                           "ViT-B-16.pt"));
  }
  CHECK_THROWS_AS(make_clip("vitb32_224", "openai_vitb16_224"), oml::ConfigError);
  CHECK_THROWS_WITH(make_clip("vitb32_224", "sber_vitl14_224"), Contains("set arch: vitl14_224"));
  CHECK_THROWS_WITH(make_clip("vitb32_224", "openai_vitb32"), Contains("did you mean 'openai_vitb32_224'"));

  // OpenAI's download under its own name is found; Sber's downloads are all pytorch_model.bin, so
  // that name could be another arch's file and is not looked up.
  torch::manual_seed(1);
  const auto reference = make_clip("vitb32_224");
  oml::test::write_state_dict_file(dir / "ViT-B-32.pt", *reference);
  const auto loaded = oml::io::state_dict(*make_clip("vitb32_224", "openai_vitb32_224"));
  CHECK(max_abs_diff(loaded.at("proj"), oml::io::state_dict(*reference).at("proj")) == 0);
  oml::test::write_state_dict_file(dir / "pytorch_model.bin", *reference);
  CHECK_THROWS_WITH(make_clip("vitb32_224", "sber_vitb32_224"),
                    Contains((dir / "sber_vitb32_224.ckpt").string()));
  fs::rename(dir / "pytorch_model.bin", dir / "sber_vitb32_224.ckpt");
  CHECK(max_abs_diff(oml::io::state_dict(*make_clip("vitb32_224", "sber_vitb32_224")).at("conv1.weight"),
                     oml::io::state_dict(*reference).at("conv1.weight")) == 0);
  oml::models::set_weights_dir("");
}

namespace {

// The problems the parse of `extractor: <yaml>` finds (none: empty).
}  // namespace

TEST_CASE(
    "OML's vit_clip config parses as it is, a missing arch or a zoo name for another arch is a config error",
    "[models][vit_clip][registry]") {
  oml::cli::register_builtins();
  // pipelines/features_extraction/configs_experimental/train_inshop_arcface.yaml
  CHECK(parse_errors("{name: vit_clip, args: {arch: vitb16_224, weights: openai_vitb16_224, "
                     "normalise_features: False}}")
            .empty());
  const auto no_arch = parse_errors("{name: vit_clip, args: {weights: null}}");
  REQUIRE(no_arch.size() == 1);
  CHECK_THROWS_WITH(no_arch.throw_if_any(), Contains("arch"));
  const auto other_arch =
      parse_errors("{name: vit_clip, args: {arch: vitb32_224, weights: openai_vitl14_224}}");
  REQUIRE(other_arch.size() == 1);
  CHECK_THROWS_WITH(other_arch.throw_if_any(),
                    Contains("weights 'openai_vitl14_224' are for arch vitl14_224"));

  // Normalised by default, as OML's class.
  const auto model = extractor_from_yaml("{name: vit_clip, args: {arch: vitb32_224}}");
  torch::NoGradGuard no_grad;
  CHECK(torch::allclose(model->forward(torch::randn({2, 3, 224, 224})).norm(2, 1), torch::ones({2}), 1e-5,
                        1e-5));
  // oml-validate's and oml-predict's top-level weights go through its own loader.
  CHECK(std::dynamic_pointer_cast<oml::models::OmlWeightsReader>(model) != nullptr);

  // Inside extractor_with_mlp the network sits under OML's `extractor.visual.`.
  const auto mlp = extractor_from_yaml(
      ("{name: extractor_with_mlp, args: {extractor: {name: vit_clip, args: {arch: vitb32_224}}, "
       "mlp_features: [128]}}"));
  const auto names = oml::io::state_dict(*mlp);
  CHECK(names.count("extractor.visual.transformer.resblocks.0.attn.in_proj_weight") == 1);
  CHECK(mlp->feat_dim() == 128);
}

}  // namespace vit_clip_tests
