// Round trip with PyTorch itself (Debian's python3-torch and python3-torchvision, installed by
// `scripts/setup.sh --with-tests`): torchvision weights load into oml-cpp's resnet and give the
// same outputs; an oml-cpp checkpoint loads into torchvision with strict=True.
#include <torch/torch.h>

#include "oml/io/checkpoint.h"
#include "oml/io/torch_file.h"
#include "oml/models/resnet.h"
#include "support/support.h"

using oml::test::max_abs_diff;

namespace {

void python(const std::string& command, const oml::test::TempDir& dir) {
  const std::string script = oml::test::source_path("tests/python/torchvision_interop.py");
  const auto result = oml::test::run("/usr/bin/python3 " + oml::test::quote(script) + " " + command + " " +
                                     oml::test::quote(dir.path().string()));
  INFO("python3 " << command << " failed (are python3-torch and python3-torchvision installed? "
                  << "scripts/setup.sh --with-tests)\nstdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
}

}  // namespace

TEST_CASE("Torchvision resnet18 weights give the same outputs in oml-cpp", "[models][io][pytorch]") {
  oml::test::TempDir dir;
  python("export", dir);
  const auto images = oml::io::load_tensor(dir / "input.pt");
  torch::NoGradGuard no_grad;

  oml::models::ResNetOptions with_fc;
  with_fc.arch = "resnet18";
  with_fc.remove_fc = false;
  with_fc.weights = (dir / "tv_resnet18.pth").string();
  oml::models::ResNet classifier(with_fc);
  classifier->eval();
  CHECK(max_abs_diff(classifier->forward(images), oml::io::load_tensor(dir / "expected_logits.pt")) <= 1e-4);

  // The same ImageNet file fits an extractor without fc (its fc.* entries are ignored), and a
  // Lightning checkpoint ("state_dict" with "model." prefixes, Python objects beside) works too.
  for (const char* file : {"tv_resnet18.pth", "lightning.ckpt"}) {
    INFO(file);
    oml::models::ResNetOptions features;
    features.arch = "resnet18";
    features.weights = (dir / file).string();
    oml::models::ResNet extractor(features);
    extractor->eval();
    CHECK(extractor->feat_dim() == 512);
    CHECK(max_abs_diff(extractor->forward(images), oml::io::load_tensor(dir / "expected_features.pt")) <=
          1e-4);
  }
}

TEST_CASE("An oml-cpp checkpoint loads into torchvision with strict=True and gives the same outputs",
          "[models][io][pytorch]") {
  oml::test::TempDir dir;
  python("export", dir);  // for input.pt
  torch::manual_seed(3);
  oml::models::ResNetOptions options;
  options.arch = "resnet18";
  options.remove_fc = false;
  oml::models::ResNet model(options);
  {
    // A few training-mode passes move the BatchNorm statistics away from their defaults.
    torch::NoGradGuard no_grad;
    for (int i = 0; i < 3; ++i) model->forward(torch::randn({4, 3, 64, 64}));
  }
  model->eval();
  torch::NoGradGuard no_grad;
  const auto images = oml::io::load_tensor(dir / "input.pt");
  oml::io::save_tensor(dir / "oml_outputs.pt", model->forward(images));
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = oml::io::state_dict(*model);
  ckpt.epoch = 2;
  ckpt.step = 40;
  ckpt.config = "extractor: {name: resnet, args: {arch: resnet18, remove_fc: false}}\n";
  ckpt.metrics["OVERALL/cmc/1"] = 0.5;
  oml::io::save_checkpoint(dir / "oml.ckpt", ckpt);
  python("check", dir);
}
