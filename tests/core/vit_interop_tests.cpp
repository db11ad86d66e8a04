// ViT extractors against Python (Debian's python3-torch): tests/python/vit_reference.py builds
// DINO's and DINOv2's networks from torch primitives with OML's parameter names, so that
// - random weights saved as a plain state dict and as a Lightning-style .ckpt give the same
//   embeddings in oml-cpp (at the pre-training grid and at sizes that interpolate the position
//   embedding), and
// - a checkpoint written by oml-cpp loads into the Python model the way OML's ViTExtractor loads
//   weights (criterion removed, prefix found by `norm.bias`, strict=True) and gives the same
//   embeddings.
// Plus every bad weights file a user can hand to `extractor: {name: vit}`.
#include <torch/torch.h>

#include <fstream>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/io/checkpoint.h"
#include "oml/io/torch_file.h"
#include "oml/models/resnet.h"
#include "oml/models/vit.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace vit_interop_tests {

using Catch::Matchers::Contains;
using oml::test::max_abs_diff;
using oml::test::TempDir;

namespace {

oml::models::ViT make_vit(const std::string& arch, const std::string& weights = "") {
  oml::models::ViTOptions options;
  options.arch = arch;
  options.weights = weights;
  oml::models::ViT model(options);
  model->eval();
  return model;
}

// vit_reference.py's export of `arch` (read-only).
const std::filesystem::path& exported(const std::string& arch) {
  return oml::test::reference_export("vit_reference.py", "export", {arch});
}

// Python's embeddings for every input the export wrote, from both weights files.
void check_against_python(const std::string& arch, const std::vector<std::string>& inputs) {
  const auto& dir = exported(arch);
  torch::NoGradGuard no_grad;
  for (const std::string& file : {arch + ".pth", arch + "_lightning.ckpt"}) {
    INFO(file);
    auto model = make_vit(arch, (dir / file).string());
    for (const auto& input : inputs) {
      INFO(input);
      const auto images = oml::io::load_tensor(dir / (arch + "_" + input + ".pt"));
      const auto expected = oml::io::load_tensor(dir / (arch + "_" + input + "_expected.pt"));
      const auto embeddings = model->forward(images);
      REQUIRE(embeddings.sizes() == expected.sizes());
      CHECK(max_abs_diff(embeddings, expected) <= 1e-4);
    }
  }
}

// A ViT after one SGD step on random images, saved as an oml-cpp checkpoint; its embeddings of
// the same input beside it. Python then loads it as OML does and compares.
void check_checkpoint_in_python(const std::string& arch, int64_t size) {
  TempDir dir;
  torch::manual_seed(11);
  auto model = make_vit(arch);
  model->train();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  sgd.zero_grad();
  model->forward(torch::randn({2, 3, size, size})).pow(2).mean().backward();
  sgd.step();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto images = torch::randn({2, 3, 224, 224});
  oml::io::save_tensor(dir / (arch + "_input_224.pt"), images);
  oml::io::save_tensor(dir / ("oml_" + arch + "_out.pt"), model->forward(images));
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = oml::io::state_dict(*model);
  ckpt.epoch = 1;
  ckpt.step = 1;
  ckpt.config = "extractor: {name: vit, args: {arch: " + arch + "}}\n";
  oml::io::save_checkpoint(dir / ("oml_" + arch + ".ckpt"), ckpt);
  oml::test::run_reference("vit_reference.py", "check", dir.path(), {arch});
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

}  // namespace

TEST_CASE("DINO vits16 gives Python's embeddings from a state dict and a Lightning checkpoint",
          "[models][vit][pytorch]") {
  check_against_python("vits16", {"input_224", "input_160x192"});
}

TEST_CASE("DINOv2 vits14_reg gives Python's embeddings from a state dict and a Lightning checkpoint",
          "[models][vit][pytorch]") {
  check_against_python("vits14_reg", {"input_224", "input_126x182"});
}

TEST_CASE("use_multi_scale and normalise_features follow OML's ViTExtractor", "[models][vit][pytorch]") {
  const auto& dir = exported("vits16");
  oml::models::ViTOptions options;
  options.arch = "vits16";
  options.weights = (dir / "vits16.pth").string();
  options.use_multi_scale = true;
  options.normalise_features = true;
  oml::models::ViT model(options);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / "vits16_input_224.pt");
  const auto expected = oml::io::load_tensor(dir / "vits16_input_224_multiscale_normalised.pt");
  CHECK(max_abs_diff(model->forward(images), expected) <= 1e-4);
}

TEST_CASE("An oml-cpp ViT checkpoint loads into OML's Python model with strict=True and the same embeddings",
          "[models][vit][pytorch]") {
  SECTION("vits16") { check_checkpoint_in_python("vits16", 64); }
  SECTION("vits14_reg") { check_checkpoint_in_python("vits14_reg", 56); }
}

TEST_CASE("ViT parameters carry DINO's and DINOv2's names", "[models][vit]") {
  const auto dino = oml::io::state_dict(*make_vit("vits16"));
  for (const char* name : {"cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.norm1.weight",
                           "blocks.0.attn.qkv.bias", "blocks.11.attn.proj.weight", "blocks.3.mlp.fc1.weight",
                           "blocks.3.mlp.fc2.bias", "norm.bias"}) {
    CHECK(dino.count(name) == 1);
  }
  CHECK(dino.at("pos_embed").sizes() == torch::IntArrayRef({1, 197, 384}));
  CHECK(dino.count("mask_token") == 0);
  CHECK(dino.size() == 4 + 12 * 12 + 2);

  const auto v2 = oml::io::state_dict(*make_vit("vits14_reg"));
  CHECK(v2.at("pos_embed").sizes() == torch::IntArrayRef({1, 1370, 384}));
  CHECK(v2.at("register_tokens").sizes() == torch::IntArrayRef({1, 4, 384}));
  CHECK(v2.at("mask_token").sizes() == torch::IntArrayRef({1, 384}));
  CHECK(v2.count("blocks.11.ls2.gamma") == 1);
  CHECK(make_vit("vitb14")->feat_dim() == 768);
  CHECK_THROWS_WITH(make_vit("vits15"), Contains("unknown arch 'vits15'") && Contains("vits16"));
}

TEST_CASE("The fused inference attention and the training path give the same embeddings", "[models][vit]") {
  torch::manual_seed(2);
  for (const char* arch : {"vits16", "vits14_reg"}) {
    INFO(arch);
    auto model = make_vit(arch);
    const auto images = torch::randn({2, 3, 112, 112});
    const auto with_autograd = model->forward(images);  // matmul + softmax, differentiable
    torch::NoGradGuard no_grad;
    CHECK(max_abs_diff(model->forward(images), with_autograd.detach()) <= 1e-5);
  }
}

TEST_CASE("vitb16 weights into vits16 name the first mismatching key and both shapes", "[models][vit][io]") {
  TempDir dir;
  oml::test::write_state_dict_file(dir / "vitb16.pth", *make_vit("vitb16"));
  try {
    make_vit("vits16", (dir / "vitb16.pth").string());
    FAIL("no error");
  } catch (const oml::DataError& e) {
    std::string text = e.what();
    for (const auto& line : e.context()) text += "\n" + line;
    CHECK_THAT(text, Contains("vitb16.pth") && Contains("blocks.0.attn.proj.bias (file [768], model [384])"));
    CHECK_THAT(text, Contains("the file holds vitb16 weights, the model is arch vits16"));
  }
}

TEST_CASE("A checkpoint without a ViT backbone lists some of its keys", "[models][vit][io]") {
  TempDir dir;
  c10::Dict<std::string, at::Tensor> state;
  state.insert("criterion.weight", torch::zeros({10, 4}));
  state.insert("model.layer4.0.bn1.bias", torch::zeros({4}));
  c10::impl::GenericDict ckpt(c10::StringType::get(), c10::AnyType::get());
  ckpt.insert("state_dict", state);
  ckpt.insert("epoch", int64_t{3});
  oml::io::write_torch_file(dir / "resnet.ckpt", ckpt);
  try {
    make_vit("vits16", (dir / "resnet.ckpt").string());
    FAIL("no error");
  } catch (const oml::DataError& e) {
    std::string text = e.what();
    for (const auto& line : e.context()) text += "\n" + line;
    CHECK_THAT(text, Contains("resnet.ckpt: no backbone found: no key ends with 'norm.bias'") &&
                         Contains("criterion.weight") && Contains("model.layer4.0.bn1.bias"));
  }
}

TEST_CASE("Truncated weights and files that are not torch files are data errors", "[models][vit][io]") {
  TempDir dir;
  oml::test::write_file(dir / "notes.pth", "these are not weights\n");
  CHECK_THROWS_AS(make_vit("vits16", (dir / "notes.pth").string()), oml::DataError);
  CHECK_THROWS_WITH(make_vit("vits16", (dir / "notes.pth").string()), Contains("notes.pth"));

  oml::io::save_tensor(dir / "whole.pt", torch::randn({64, 64}));
  const std::string bytes = oml::test::read_file(dir / "whole.pt");
  write_bytes(dir / "truncated.pth", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(make_vit("vits16", (dir / "truncated.pth").string()), oml::DataError);
  CHECK_THROWS_WITH(make_vit("vits16", (dir / "truncated.pth").string()), Contains("truncated.pth"));

  CHECK_THROWS_WITH(make_vit("vits16", (dir / "missing.pth").string()), Contains("missing.pth"));
}

TEST_CASE("Zoo names resolve in the weights folder, and a missing file names its path and URL",
          "[models][vit][zoo]") {
  TempDir dir;
  oml::models::set_weights_dir(dir.path());
  try {
    make_vit("vits16", "vits16_dino");
    FAIL("no error");
  } catch (const oml::DataError& e) {
    std::string text = e.what();
    for (const auto& line : e.context()) text += "\n" + line;
    CHECK_THAT(text, Contains((dir / "vits16_dino.ckpt").string()) &&
                         Contains("https://dl.fbaipublicfiles.com/dino/dino_deitsmall16_pretrain/"
                                  "dino_deitsmall16_pretrain.pth"));
  }
  CHECK_THROWS_AS(make_vit("vits16", "vitb14_dinov2"), oml::ConfigError);  // another arch
  oml::models::ResNetOptions resnet;
  resnet.arch = "resnet18";
  resnet.weights = "resnet18_imagenet1k_v1";
  CHECK_THROWS_WITH(oml::models::ResNet(resnet), Contains((dir / "resnet18-f37072fd.pth").string()));
  CHECK_THROWS_WITH(make_vit("vits16", "vits16_dinoo"), Contains("did you mean 'vits16_dino'"));

  // The file under OML's name, and the published file under its own name, are both found.
  torch::manual_seed(5);
  const auto reference = make_vit("vits16");
  oml::test::write_state_dict_file(dir / "dino_deitsmall16_pretrain.pth", *reference);
  const auto loaded = oml::io::state_dict(*make_vit("vits16", "vits16_dino"));
  const auto expected = oml::io::state_dict(*reference);
  CHECK(max_abs_diff(loaded.at("pos_embed"), expected.at("pos_embed")) == 0);
  CHECK(max_abs_diff(loaded.at("blocks.5.mlp.fc1.weight"), expected.at("blocks.5.mlp.fc1.weight")) == 0);
  oml::models::set_weights_dir("");
}

namespace {

std::shared_ptr<oml::models::Extractor> extractor_from_yaml(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("extractor: " + yaml, "model.yaml");
  auto model =
      oml::registries().extractors.create(oml::config::parse_component(doc.root()["extractor"], "extractor"));
  model->eval();
  return model;
}

std::string mlp_yaml(const std::string& backbone, const std::string& features, const std::string& weights) {
  return "{name: extractor_with_mlp, args: {extractor: " + backbone + ", mlp_features: " + features +
         (weights.empty() ? "" : ", weights: " + weights) + "}}";
}

const std::string kVits16 = "{name: vit, args: {arch: vits16}}";

}  // namespace

TEST_CASE(
    "extractor_with_mlp over a ViT is OML's ExtractorWithMLP, names included: OML's zoo model and "
    "checkpoints load, ours load in Python, and our older files still load",
    "[models][vit][zoo][pytorch]") {
  TempDir work;  // the export's files, and this test's own beside them
  oml::test::link_files(oml::test::reference_export("vit_zoo_reference.py", "mlp_export"), work.path());
  const std::filesystem::path& dir = work.path();
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / "mlp_input.pt");

  // OML's zoo model by name: a Lightning checkpoint with `model.` in front of OML's names.
  oml::models::set_weights_dir(dir / "zoo");
  const auto zoo = extractor_from_yaml(mlp_yaml(kVits16, "[384]", "vits16_224_mlp_384_inshop"));
  CHECK(max_abs_diff(zoo->forward(images), oml::io::load_tensor(dir / "mlp_384_expected.pt")) <= 1e-4);
  CHECK_THROWS_WITH(extractor_from_yaml(mlp_yaml("{name: resnet, args: {arch: resnet18}}", "[384]",
                                                 "vits16_224_mlp_384_inshop")),
                    Contains("vits16 + mlp_features [384]") && Contains("resnet18 + mlp_features [384]"));
  oml::models::set_weights_dir("");

  // Two layers: torchvision's MLP puts the second Linear at projection.3.
  const std::string plain = (dir / "mlp_256_128.pth").string();
  const auto two = extractor_from_yaml(mlp_yaml(kVits16, "[256, 128]", plain));
  const auto expected = oml::io::load_tensor(dir / "mlp_256_128_expected.pt");
  CHECK(max_abs_diff(two->forward(images), expected) <= 1e-4);
  auto names = oml::io::state_dict(*two);
  CHECK(names.count("extractor.model.blocks.11.mlp.fc2.weight") == 1);
  CHECK(names.count("projection.3.weight") == 1);

  // Ours, changed, back to Python through OML's loader.
  {
    torch::manual_seed(2);
    for (auto& p : two->parameters()) p.add_(torch::randn_like(p) * 0.01);
    oml::io::Checkpoint ckpt;
    ckpt.state_dict = oml::io::state_dict(*two);
    ckpt.config = "extractor: " + mlp_yaml(kVits16, "[256, 128]", "") + "\n";
    oml::io::save_checkpoint(dir / "oml_mlp_256_128.ckpt", ckpt);
    oml::io::save_tensor(dir / "oml_mlp_256_128_out.pt", two->forward(images));
    oml::test::run_reference("vit_zoo_reference.py", "mlp_check", dir);
  }

  // A file with the names oml-cpp wrote before: backbone right under `extractor.`, the second
  // Linear at projection.2.
  {
    oml::io::Checkpoint old;
    for (const auto& [name, tensor] :
         oml::io::state_dict(*extractor_from_yaml(mlp_yaml(kVits16, "[256, 128]", plain)))) {
      std::string renamed = name;
      if (name.rfind("extractor.model.", 0) == 0) renamed = "extractor." + name.substr(16);
      if (name.rfind("projection.3.", 0) == 0) renamed = "projection.2." + name.substr(13);
      old.state_dict.emplace(renamed, tensor);
    }
    REQUIRE(old.state_dict.count("extractor.cls_token") == 1);
    oml::io::save_checkpoint(dir / "old_names.ckpt", old);
    const auto loaded =
        extractor_from_yaml(mlp_yaml(kVits16, "[256, 128]", (dir / "old_names.ckpt").string()));
    CHECK(max_abs_diff(loaded->forward(images), expected) <= 1e-4);
  }
}

}  // namespace vit_interop_tests
