// Round trip with PyTorch itself (the pinned torch and torchvision wheels in the virtual
// environment of `scripts/setup.sh`): torchvision weights load into oml-cpp's resnet and give the
// same outputs; an oml-cpp checkpoint loads into torchvision with strict=True; every kind of file
// oml-cpp writes loads with torch.load's default (weights_only=True since PyTorch 2.6) and with
// weights_only=False alike.
#include <torch/torch.h>

#include "oml/io/checkpoint.h"
#include "oml/io/torch_file.h"
#include "oml/models/resnet.h"
#include "oml/optim/grad_scaler.h"
#include "oml/optim/resume.h"
#include "support/support.h"

namespace pytorch_interop_tests {

using oml::test::max_abs_diff;

namespace {

void python(const std::string& command, const oml::test::TempDir& dir) {
  oml::test::run_reference("torchvision_interop.py", command, dir.path());
}

// torchvision_interop.py's export (read-only).
const std::filesystem::path& exported() {
  return oml::test::reference_export("torchvision_interop.py", "export");
}

}  // namespace

TEST_CASE("Torchvision resnet18 weights give the same outputs in oml-cpp", "[models][io][pytorch]") {
  const auto& dir = exported();
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
  oml::test::link_files(exported(), dir.path());  // input.pt
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

TEST_CASE("Every kind of file oml-cpp writes loads with torch.load(weights_only=True) and without it",
          "[io][pytorch]") {
  oml::test::TempDir dir;
  torch::manual_seed(5);
  oml::models::ResNetOptions options;
  options.arch = "resnet18";
  oml::models::ResNet model(options);
  const auto weights = oml::io::state_dict(*model);
  c10::Dict<std::string, at::Tensor> weights_dict;
  for (const auto& [name, tensor] : weights) weights_dict.insert(name, tensor);
  oml::io::write_torch_file(dir / "state_dict.pth", weights_dict);

  // A last.ckpt as a resumable run writes it: optimizer, scheduler-like dict, loss parameters,
  // sampler position, generator state and a gradient scaler.
  std::vector<at::Tensor> params;
  for (const auto& p : model->parameters()) params.push_back(p);
  torch::optim::Adam adam(params, torch::optim::AdamOptions(1e-3));
  model->forward(torch::randn({2, 3, 32, 32})).sum().backward();
  adam.step();
  oml::optim::GradScaler scaler;
  oml::io::ResumeState resume;
  resume.optimizer = oml::optim::save_optimizer_state(adam);
  c10::impl::GenericDict scheduler(c10::StringType::get(), c10::AnyType::get());
  scheduler.insert("last_epoch", int64_t{3});
  scheduler.insert("base_lrs", c10::List<double>({1e-3, 1e-2}));
  scheduler.insert("name", std::string("cosine"));
  resume.scheduler = scheduler;
  resume.criterion["weight"] = torch::randn({10, 4});
  resume.sampler_epoch = 2;
  resume.sampler_batch = 17;
  resume.sampler_consumed = 1LL << 40;  // an integer past 32 bits
  resume.sampler_world_size = 2;
  resume.rng = oml::optim::save_rng_state();
  resume.grad_scaler = scaler.state();
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = weights;
  ckpt.epoch = 4;
  ckpt.step = -1;
  ckpt.config = "seed: 0\nname: ü\n";
  ckpt.metrics["OVERALL/cmc/1"] = 0.875;
  ckpt.resume = resume;
  oml::io::save_checkpoint(dir / "last.ckpt", ckpt);

  // embeddings.pt, and tensors of every dtype a file may hold.
  oml::io::save_tensor(dir / "embeddings.pt", torch::randn({7, 16}));
  c10::impl::GenericDict dtypes(c10::StringType::get(), c10::AnyType::get());
  for (const auto dtype : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16, torch::kLong,
                           torch::kInt, torch::kShort, torch::kChar, torch::kByte, torch::kBool}) {
    dtypes.insert(std::string(c10::toString(dtype)), torch::arange(6).reshape({2, 3}).to(dtype));
  }
  dtypes.insert("empty", torch::zeros({0, 3}));
  dtypes.insert("scalar", torch::tensor(2.5));
  dtypes.insert("strided", torch::arange(12, torch::kFloat).reshape({3, 4}).t());  // written contiguous
  dtypes.insert("tuple", c10::ivalue::Tuple::create({c10::IValue(1), c10::IValue("a"), c10::IValue()}));
  dtypes.insert("big", int64_t{-(1LL << 50)});
  oml::io::write_torch_file(dir / "dtypes.pt", dtypes);

  python("load_all", dir);

  // And back: oml-cpp reads what it wrote.
  const auto again = oml::io::load_checkpoint(dir / "last.ckpt");
  CHECK(again.resume->sampler_consumed == (1LL << 40));
  CHECK(again.config == ckpt.config);
  CHECK(torch::equal(again.state_dict.at("conv1.weight"), weights.at("conv1.weight")));
  const auto read = oml::io::read_torch_file(dir / "dtypes.pt").toGenericDict();
  CHECK(torch::equal(read.at("strided").toTensor(), torch::arange(12, torch::kFloat).reshape({3, 4}).t()));
  CHECK(read.at("big").toInt() == -(1LL << 50));
}

}  // namespace pytorch_interop_tests
