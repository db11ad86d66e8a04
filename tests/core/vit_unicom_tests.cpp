// vit_unicom against OML's ViTUnicomExtractor: tests/python/vit_unicom_reference.py carries OML's
// network (UNICOM's VisionTransformer) and OML's way of reading weights, so that random weights
// as UNICOM publishes them (float16 state dicts) and as OML's Lightning checkpoints give OML's
// embeddings in oml-cpp, and a checkpoint written by oml-cpp gives oml-cpp's embeddings in OML.
#include <torch/torch.h>

#include "core/extractor_yaml.h"
#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/vit_unicom.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace vit_unicom_tests {

using Catch::Matchers::Contains;
using oml::test::error_text;
using oml::test::max_abs_diff;
using oml::test::TempDir;
namespace fs = std::filesystem;

using oml::test::extractor_from_yaml;
using oml::test::parse_errors;

namespace {

oml::models::ViTUnicom make_unicom(const std::string& arch, const std::string& weights = "",
                                   bool normalise_features = false) {
  oml::models::ViTUnicomOptions options;
  options.arch = arch;
  options.weights = weights;
  options.normalise_features = normalise_features;
  oml::models::ViTUnicom model(options);
  model->eval();
  return model;
}

}  // namespace

TEST_CASE(
    "UNICOM ViT-B/32 gives OML's embeddings from UNICOM's float16 state dict, by zoo name, and from OML's "
    "Lightning checkpoint",
    "[models][vit_unicom][pytorch]") {
  const fs::path& dir = oml::test::reference_export("vit_unicom_reference.py", "export", {"vitb32_unicom"});
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / "vitb32_unicom_input.pt");
  const auto expected = oml::io::load_tensor(dir / "vitb32_unicom_expected.pt");
  for (const std::string file : {"vitb32_unicom.pt", "vitb32_unicom_lightning.ckpt"}) {
    INFO(file);
    const auto embeddings = make_unicom("vitb32_unicom", (dir / file).string())->forward(images);
    REQUIRE(embeddings.sizes() == expected.sizes());
    CHECK(max_abs_diff(embeddings, expected) <= 1e-4);
  }
  const auto normalised =
      make_unicom("vitb32_unicom", (dir / "vitb32_unicom.pt").string(), true)->forward(images);
  CHECK(max_abs_diff(normalised, oml::io::load_tensor(dir / "vitb32_unicom_expected_normalised.pt")) <= 1e-5);

  // The names are OML's: exactly the keys of the Python model's state dict, buffers included.
  const auto python_names =
      oml::io::find_state_dict(oml::io::read_torch_file(dir / "vitb32_unicom.pt"), "pt");
  const auto names = oml::io::state_dict(*make_unicom("vitb32_unicom"));
  REQUIRE(names.size() == python_names.size());
  for (const auto& [name, tensor] : python_names) {
    INFO(name);
    REQUIRE(names.count(name) == 1);
    CHECK(names.at(name).sizes() == tensor.sizes());
  }

  // By zoo name: where OML keeps UNICOM's download (torch/checkpoints under the weights folder).
  TempDir zoo_dir;
  fs::create_directories(zoo_dir / "torch" / "checkpoints");
  fs::create_symlink(dir / "vitb32_unicom.pt", zoo_dir / "torch" / "checkpoints" / "FP16-ViT-B-32.pt");
  oml::models::set_weights_dir(zoo_dir.path());
  const auto zoo = make_unicom("vitb32_unicom", "vitb32_unicom")->forward(images);
  oml::models::set_weights_dir("");
  CHECK(max_abs_diff(zoo, expected) <= 1e-4);
}

TEST_CASE(
    "An oml-cpp vit_unicom checkpoint loads into OML's ViTUnicomExtractor and gives the same embeddings",
    "[models][vit_unicom][pytorch]") {
  TempDir dir;
  torch::manual_seed(11);
  auto model = make_unicom("vitb32_unicom");
  model->train();  // drop path and BatchNorm's batch statistics
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  sgd.zero_grad();
  model->forward(torch::randn({4, 3, 224, 224})).pow(2).mean().backward();
  sgd.step();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto images = torch::randn({2, 3, 224, 224});
  oml::io::save_tensor(dir / "vitb32_unicom_input.pt", images);
  oml::io::save_tensor(dir / "oml_vitb32_unicom_out.pt", model->forward(images));
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = oml::io::state_dict(*model);
  CHECK(ckpt.state_dict.at("feature.1.num_batches_tracked").item<int64_t>() == 1);
  ckpt.config = "extractor: {name: vit_unicom, args: {arch: vitb32_unicom, normalise_features: false}}\n";
  oml::io::save_checkpoint(dir / "oml_vitb32_unicom.ckpt", ckpt);
  oml::test::run_reference("vit_unicom_reference.py", "check", dir.path(), {"vitb32_unicom"});
}

TEST_CASE("vit_unicom's archs have UNICOM's shapes, other image sizes, archs and weights are refused by name",
          "[models][vit_unicom]") {
  const auto b32 = oml::io::state_dict(*make_unicom("vitb32_unicom"));
  CHECK(b32.at("pos_embed").sizes() == torch::IntArrayRef({1, 49, 768}));
  CHECK(b32.count("blocks.0.attn.qkv.bias") == 0);
  CHECK(b32.at("feature.0.weight").sizes() == torch::IntArrayRef({768, 49 * 768}));
  CHECK(b32.at("feature.3.running_var").sizes() == torch::IntArrayRef({512}));
  CHECK(make_unicom("vitb32_unicom")->feat_dim() == 512);
  CHECK(make_unicom("vitb32_unicom")->oml_module_attribute() == "model");
  const auto l336 = oml::models::vit_unicom_arch("vitl14_336px_unicom");
  CHECK(l336.input_size == 336);
  CHECK(l336.dim == 1024);
  CHECK(l336.embedding_size == 768);
  CHECK_THROWS_WITH(make_unicom("vitb32"), Contains("unknown arch 'vitb32'") && Contains("vitb32_unicom"));

  auto model = make_unicom("vitb32_unicom");
  torch::NoGradGuard no_grad;
  CHECK_THROWS_WITH(
      model->forward(torch::randn({2, 3, 256, 256})),
      Contains("vitb32_unicom takes images of 224x224 px, got 256x256") && Contains("unicom_transforms"));

  TempDir dir;
  oml::models::set_weights_dir(dir.path());
  try {
    make_unicom("vitb32_unicom", "vitb32_unicom");
    FAIL("no error");
  } catch (const oml::DataError& e) {
    CHECK_THAT(error_text(e),
               Contains((dir / "FP16-ViT-B-32.pt").string()) &&
                   Contains("https://github.com/deepglint/unicom/releases/download/b32/FP16-ViT-B-32.pt"));
  }
  CHECK_THROWS_AS(make_unicom("vitb32_unicom", "vitb16_unicom"), oml::ConfigError);
  oml::models::set_weights_dir("");
}

TEST_CASE("OML's vit_unicom config parses as it is, normalise_features is required as in OML",
          "[models][vit_unicom][registry]") {
  oml::cli::register_builtins();
  CHECK(
      parse_errors("{name: vit_unicom, args: {arch: vitb32_unicom, weights: null, normalise_features: True}}")
          .empty());
  CHECK(parse_errors("{name: vit_unicom, args: {arch: vitb32_unicom, normalise_features: true, "
                     "use_gradient_ckpt: false}}")
            .empty());
  const auto missing = parse_errors("{name: vit_unicom, args: {arch: vitb32_unicom}}");
  REQUIRE(missing.size() == 1);
  CHECK_THROWS_WITH(missing.throw_if_any(), Contains("normalise_features"));

  const auto mlp = extractor_from_yaml(
      "{name: extractor_with_mlp, args: {extractor: {name: vit_unicom, args: {arch: vitb32_unicom, "
      "normalise_features: false}}, mlp_features: [64]}}");
  CHECK(oml::io::state_dict(*mlp).count("extractor.model.feature.0.weight") == 1);
  CHECK(std::dynamic_pointer_cast<oml::models::OmlWeightsReader>(extractor_from_yaml(
            "{name: vit_unicom, args: {arch: vitb32_unicom, normalise_features: true}}")) != nullptr);
}

}  // namespace vit_unicom_tests
