// OML's resnet50_projector against OML's code: tests/python/resnet_projector_reference.py builds
// torchvision's resnet50 with OML's projection head (random weights), saves it as OML does, and
// computes what OML's ResnetExtractor outputs after loading it with OML's own loading code; oml-cpp
// loads the same files as they are and must give the same embeddings to 1e-4.
#include <torch/torch.h>

#include <filesystem>

#include "oml/config/document.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/resnet.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace resnet_projector_tests {

using Catch::Matchers::Contains;
using oml::test::max_abs_diff;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<oml::models::Extractor> extractor_from_yaml(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("extractor: " + yaml, "model.yaml");
  auto model =
      oml::registries().extractors.create(oml::config::parse_component(doc.root()["extractor"], "extractor"));
  model->eval();
  return model;
}

// The reference's cases as `resnet` args (ResnetExtractor's args in resnet_projector_reference.py).
const std::vector<std::pair<std::string, std::string>> kCases{
    {"head", "gem_p: null, remove_fc: false, normalise_features: false"},
    {"head_gem_normalised", "gem_p: 3.0, remove_fc: false, normalise_features: true"},
    {"oml_config", "gem_p: 5.0, remove_fc: True, normalise_features: False"},
};

}  // namespace

TEST_CASE(
    "resnet50_projector gives OML's embeddings from OML's extractor state dict, Lightning checkpoint "
    "and MoCo checkpoint",
    "[models][resnet][pytorch]") {
  const fs::path& dir = oml::test::reference_export("resnet_projector_reference.py", "export");
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / "input.pt");
  for (const auto& [name, args] : kCases) {
    const auto expected = oml::io::load_tensor(dir / ("expected_" + name + ".pt"));
    for (const std::string file : {"extractor.pth", "lightning.ckpt", "moco.pth.tar"}) {
      INFO(name << " from " << file);
      const auto model = extractor_from_yaml("{name: resnet, args: {arch: resnet50_projector, " + args +
                                             ", weights: " + (dir / file).string() + "}}");
      CHECK(model->feat_dim() == expected.size(1));
      const auto embeddings = model->forward(images);
      REQUIRE(embeddings.sizes() == expected.sizes());
      CHECK(max_abs_diff(embeddings, expected) <= 1e-4);
    }
  }
  // The names are OML's (torchvision's under ResnetExtractor's `model.`): with the head, exactly
  // the keys of OML's extractor state dict, buffers included.
  const auto python = oml::io::find_state_dict(oml::io::read_torch_file(dir / "extractor.pth"), "pth");
  const auto names =
      oml::io::state_dict(*extractor_from_yaml("{name: resnet, args: {arch: resnet50_projector, "
                                               "remove_fc: false}}"));
  REQUIRE(names.size() == python.size());
  for (const auto& [name, tensor] : python) {
    INFO(name);
    REQUIRE(names.count(name.substr(std::string("model.").size())) == 1);
    CHECK(names.at(name.substr(6)).sizes() == tensor.sizes());
  }
  CHECK(names.count("fc.0.weight") == 1);
  CHECK(names.count("fc.2.bias") == 1);

  // By zoo name: OML's resnet50_moco_v2 is MoCo's published checkpoint, under its own file name.
  TempDir zoo_dir;
  fs::create_symlink(dir / "moco.pth.tar", zoo_dir / "moco_v2_800ep_pretrain.pth.tar");
  oml::models::set_weights_dir(zoo_dir.path());
  const auto zoo = extractor_from_yaml(
      "{name: resnet, args: {arch: resnet50_projector, gem_p: 5.0, remove_fc: True, normalise_features: "
      "False, "
      "weights: resnet50_moco_v2}}");
  oml::models::set_weights_dir("");
  CHECK(max_abs_diff(zoo->forward(images), oml::io::load_tensor(dir / "expected_oml_config.pt")) <= 1e-4);
}

TEST_CASE("resnet50_projector's head, sizes and zoo name", "[models][resnet]") {
  oml::models::ResNetOptions o;
  o.arch = "resnet50_projector";
  CHECK(oml::models::ResNet(o)->feat_dim() == 2048);  // remove_fc: true, as OML's config
  CHECK(oml::models::ResNet(o)->named_parameters().find("fc.0.weight") == nullptr);
  o.remove_fc = false;
  oml::models::ResNet head(o);
  head->eval();
  CHECK(head->feat_dim() == 128);
  CHECK(head->forward(torch::randn({1, 3, 64, 64})).sizes() == std::vector<int64_t>{1, 128});
  CHECK(head->named_parameters()["fc.0.weight"].sizes() == std::vector<int64_t>{2048, 2048});
  CHECK(head->named_parameters()["fc.2.weight"].sizes() == std::vector<int64_t>{128, 2048});
  o.num_classes = 64;
  CHECK(oml::models::ResNet(o)->feat_dim() == 64);
  // A plain resnet50 keeps its 1000-way classifier.
  o.arch = "resnet50";
  o.num_classes.reset();
  CHECK(oml::models::ResNet(o)->feat_dim() == 1000);
  // OML's MoCo weights are for resnet50_projector only.
  CHECK_THROWS_WITH(extractor_from_yaml("{name: resnet, args: {arch: resnet50, weights: resnet50_moco_v2}}"),
                    Contains("resnet50_moco_v2") && Contains("resnet50_projector"));
  CHECK_THROWS_WITH(extractor_from_yaml("{name: resnet, args: {arch: resnet51}}"),
                    Contains("resnet152, resnet50_projector"));
}

}  // namespace resnet_projector_tests
