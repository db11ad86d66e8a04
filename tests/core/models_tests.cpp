// Extractors and pairwise models: names, sizes, pooling, freezing, config errors.
#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/io/state_dict.h"
#include "oml/models/conv_net.h"
#include "oml/models/extractor_with_mlp.h"
#include "oml/models/memory_format.h"
#include "oml/models/pairwise_model.h"
#include "oml/models/resnet.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace models_tests {

using Catch::Matchers::Contains;
using namespace oml::models;

namespace {
std::shared_ptr<Extractor> build_extractor(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(yaml, "model.yaml");
  return oml::registries().extractors.create(
      oml::config::parse_component(doc.root()["extractor"], "extractor"));
}
}  // namespace

TEST_CASE("Resnet parameters and buffers carry torchvision's names", "[models]") {
  ResNetOptions o;
  o.arch = "resnet18";
  o.remove_fc = false;
  ResNet model(o);
  const auto names = oml::io::state_dict(*model);
  CHECK(names.size() == 122);  // torchvision's resnet18 state dict has 122 entries
  for (const char* name : {"conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked",
                           "layer1.0.bn1.running_var", "layer2.0.downsample.0.weight",
                           "layer2.0.downsample.1.bias", "layer4.1.conv2.weight", "fc.weight", "fc.bias"}) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
  CHECK(names.at("bn1.num_batches_tracked").scalar_type() == torch::kLong);
}

TEST_CASE("Extractors report their embedding sizes", "[models]") {
  torch::NoGradGuard no_grad;
  const auto r50 = build_extractor("extractor: {name: resnet, args: {arch: resnet50}}\n");
  CHECK(r50->feat_dim() == 2048);
  const auto r18 = build_extractor("extractor: {name: resnet, args: {arch: resnet18, remove_fc: false}}\n");
  CHECK(r18->feat_dim() == 1000);
  r18->eval();
  CHECK(r18->forward(torch::randn({2, 3, 64, 64})).sizes() == torch::IntArrayRef({2, 1000}));
  const auto small = build_extractor("extractor: {name: conv_net, args: {in_channels: 1, feat_dim: 64}}\n");
  CHECK(small->feat_dim() == 64);
  CHECK(small->forward(torch::randn({3, 1, 28, 28})).sizes() == torch::IntArrayRef({3, 64}));
  const auto mlp = build_extractor(
      "extractor: {name: extractor_with_mlp, args: {extractor: {name: conv_net}, mlp_features: [256, "
      "32]}}\n");
  CHECK(mlp->feat_dim() == 32);
  CHECK(mlp->forward(torch::randn({2, 3, 32, 32})).sizes() == torch::IntArrayRef({2, 32}));
}

TEST_CASE("A model in channels_last computes what it computes in NCHW, with gradients in its layout",
          "[models]") {
  torch::manual_seed(0);
  const auto model =
      build_extractor("extractor: {name: resnet, args: {arch: resnet18, normalise_features: true}}\n");
  const auto images = torch::randn({4, 3, 32, 32});
  const auto step = [&](const char* what) {
    INFO(what);
    model->zero_grad();
    const auto out = model->forward(images);
    out.pow(2).sum().backward();
    std::map<std::string, at::Tensor> grads;
    for (const auto& p : model->named_parameters()) grads.emplace(p.key(), p.value().grad().clone());
    return std::make_pair(out.detach(), grads);
  };
  model->train();
  CHECK(has_memory_format(*model, at::MemoryFormat::Contiguous));
  const auto nchw = step("NCHW");
  set_memory_format(*model, at::MemoryFormat::ChannelsLast);
  CHECK(has_memory_format(*model, at::MemoryFormat::ChannelsLast));
  CHECK_FALSE(has_memory_format(*model, at::MemoryFormat::Contiguous));
  const auto conv1 = model->named_parameters()["conv1.weight"];
  CHECK(conv1.is_contiguous(at::MemoryFormat::ChannelsLast));
  // The gradient existing when the layout changed follows it.
  CHECK(conv1.grad().is_contiguous(at::MemoryFormat::ChannelsLast));
  const auto nhwc = step("channels_last");
  // Other convolution kernels add in another order: as in PyTorch, where the same resnet18 step
  // differs between the layouts by 2e-5 in its output and up to 1.5e-3 of a gradient's largest
  // value (batch norm over 4 items amplifies the last bits).
  CHECK((nhwc.first - nchw.first).abs().max().item<double>() < 1e-4);
  for (const auto& [name, grad] : nchw.second) {
    INFO(name);
    const at::Tensor& other = nhwc.second.at(name);
    CHECK((other - grad).abs().max().item<double>() <= 5e-3 * grad.abs().max().item<double>());
    // Autograd's layout contract: a gradient is laid out as its parameter.
    if (other.dim() == 4) CHECK(other.is_contiguous(at::MemoryFormat::ChannelsLast));
  }
  CHECK(conv1.grad().is_contiguous(at::MemoryFormat::ChannelsLast));
  // Back to NCHW: the same values again.
  set_memory_format(*model, at::MemoryFormat::Contiguous);
  CHECK(has_memory_format(*model, at::MemoryFormat::Contiguous));
  CHECK((step("NCHW again").first - nchw.first).abs().max().item<double>() < 1e-4);
}

TEST_CASE("GeM pooling with p = 1 is average pooling and normalised features have unit norm", "[models]") {
  torch::manual_seed(0);
  ConvNetOptions avg;
  avg.channels = {8, 16};
  ConvNet a(avg);
  ConvNetOptions gem = avg;
  gem.gem_p = 1.0;
  gem.normalise_features = true;
  ConvNet g(gem);
  torch::NoGradGuard no_grad;
  for (auto& kv : oml::io::state_dict(*g)) kv.second.copy_(oml::io::state_dict(*a).at(kv.first));
  a->eval();
  g->eval();
  const auto x = torch::rand({2, 3, 16, 16});
  const auto plain = a->forward(x);
  CHECK(oml::test::max_abs_diff(g->forward(x), plain / plain.norm(2, 1, true)) < 1e-5);
  CHECK(oml::test::max_abs_diff(g->forward(x).norm(2, 1), torch::ones({2})) < 1e-5);
}

TEST_CASE("A backbone frozen for the first epochs gets no gradient and keeps its statistics", "[models]") {
  ConvNetOptions small;
  small.channels = {4};
  ExtractorWithMLPOptions o;
  o.freeze_n_epochs = 1;
  ExtractorWithMLP model(ConvNet(small).ptr(), o);
  REQUIRE(model->freezable());
  const BackboneFreezing freezing = model->requested_freezing();
  CHECK(freezing.epochs == 1);
  CHECK_FALSE(freezing.whole_run);
  CHECK_FALSE(model->backbone_frozen());  // asking is not freezing: the training loop applies it
  model->train();
  model->set_backbone_frozen(freezing.frozen_in(0));
  CHECK(model->backbone_frozen());
  CHECK_FALSE(model->backbone().is_training());
  const auto stats_before = oml::io::state_dict(model->backbone()).at("stages.0.1.running_mean").clone();
  model->forward(torch::randn({4, 3, 8, 8})).sum().backward();
  CHECK_FALSE(model->backbone().parameters()[0].grad().defined());
  CHECK(oml::test::max_abs_diff(oml::io::state_dict(model->backbone()).at("stages.0.1.running_mean"),
                                stats_before) == 0);
  model->set_backbone_frozen(freezing.frozen_in(1));
  CHECK_FALSE(model->backbone_frozen());
  CHECK(model->backbone().is_training());
  model->forward(torch::randn({4, 3, 8, 8})).sum().backward();
  CHECK(model->backbone().parameters()[0].grad().defined());
}

TEST_CASE(
    "train_backbone: false asks for a backbone frozen in every epoch, and other extractors cannot freeze",
    "[models]") {
  ConvNetOptions small;
  small.channels = {4};
  ExtractorWithMLPOptions o;
  o.train_backbone = false;
  ExtractorWithMLP model(ConvNet(small).ptr(), o);
  const BackboneFreezing freezing = model->requested_freezing();
  CHECK(freezing.whole_run);
  CHECK(freezing.frozen_in(0));
  CHECK(freezing.frozen_in(1000));

  ConvNet plain(small);
  CHECK_FALSE(plain->freezable());
  CHECK_FALSE(plain->requested_freezing().any());
  CHECK_THROWS_AS(plain->set_backbone_frozen(true), oml::InternalError);
}

TEST_CASE("Bad extractor configs name the key and what was expected", "[models][config]") {
  CHECK_THROWS_WITH(build_extractor("extractor: {name: resnet, args: {arch: resnet19}}\n"),
                    Contains("resnet18, resnet34"));
  CHECK_THROWS_WITH(build_extractor("extractor: {name: resnet, args: {archh: resnet18}}\n"),
                    Contains("archh"));
  CHECK_THROWS_WITH(build_extractor("extractor: {name: conv_net, args: {weights: /no/such.pt}}\n"),
                    Contains("/no/such.pt"));
}

TEST_CASE("Loading weights of another shape lists every mismatch", "[models][io]") {
  ConvNetOptions a;
  a.channels = {4};
  ConvNetOptions b = a;
  b.feat_dim = 16;
  ConvNet source(a), target(b);
  auto weights = oml::io::state_dict(*source);
  weights.erase("proj.bias");
  weights["extra.weight"] = torch::zeros({1});
  try {
    oml::io::load_state_dict(*target, weights, "w.pt");
    FAIL("expected a DataError");
  } catch (const oml::DataError& e) {
    CHECK_THAT(e.what(), Contains("w.pt") && Contains("1 missing") && Contains("1 unexpected"));
    std::string context;
    for (const auto& line : e.context()) context += line + "\n";
    CHECK_THAT(context, Contains("proj.bias") && Contains("extra.weight") && Contains("proj.weight ("));
  }
}

TEST_CASE("Integer or boolean weights for float parameters are refused, other floats converted",
          "[models][io]") {
  ConvNetOptions a;
  a.channels = {4};
  ConvNet source(a), target(a);
  auto weights = oml::io::state_dict(*source);
  for (auto& kv : weights) kv.second = kv.second.to(torch::kBFloat16).to(kv.second.scalar_type());
  // bf16 into fp32 is a conversion, as torch's copy_ does it.
  auto half = weights;
  half["proj.weight"] = weights.at("proj.weight").to(torch::kHalf);
  oml::io::load_state_dict(*target, half, "half.pt");
  CHECK(torch::equal(oml::io::state_dict(*target).at("proj.weight"), weights.at("proj.weight")));
  // Integers into a float weight would load as numbers that mean something else.
  auto ints = weights;
  ints["proj.weight"] = torch::ones_like(weights.at("proj.weight"), torch::kLong);
  ints["proj.bias"] = torch::ones_like(weights.at("proj.bias"), torch::kBool);
  try {
    oml::io::load_state_dict(*target, ints, "ints.pt");
    FAIL("expected a DataError");
  } catch (const oml::DataError& e) {
    CHECK_THAT(e.what(), Contains("ints.pt") && Contains("2 of another kind of type"));
    std::string context;
    for (const auto& line : e.context()) context += line + "\n";
    CHECK_THAT(context, Contains("proj.weight (file Long, model Float)") && Contains("proj.bias (file Bool"));
  }
}

TEST_CASE("A common key prefix such as module. is stripped when loading", "[models][io]") {
  ConvNetOptions a;
  a.channels = {4};
  ConvNet source(a), target(a);
  oml::io::StateDict prefixed;
  for (const auto& kv : oml::io::state_dict(*source)) prefixed["module." + kv.first] = kv.second;
  oml::io::load_state_dict(*target, prefixed, "ddp.pt");
  CHECK(oml::test::max_abs_diff(oml::io::state_dict(*target).at("proj.weight"),
                                oml::io::state_dict(*source).at("proj.weight")) == 0);
  // OML's Lightning checkpoint of a ResnetExtractor: its torchvision network is the module's
  // `model`, the extractor the Lightning module's `model`.
  ConvNet lightning(a);
  oml::io::StateDict nested;
  for (const auto& kv : oml::io::state_dict(*source)) nested["model.model." + kv.first] = kv.second;
  oml::io::load_state_dict(*lightning, nested, "epoch=3.ckpt");
  CHECK(oml::test::max_abs_diff(oml::io::state_dict(*lightning).at("proj.weight"),
                                oml::io::state_dict(*source).at("proj.weight")) == 0);
}

TEST_CASE(
    "concat_siamese has OML's head (Linear, Sigmoid, Dropout, a last Linear without bias) and freezes "
    "its backbone as OML's IFreezable",
    "[models][pairwise]") {
  ConvNetOptions small;
  small.channels = {4};
  auto extractor = ConvNet(small).ptr();
  ConcatSiamese concat(extractor, std::vector<int64_t>{8}, false);
  const auto params = oml::io::state_dict(*concat);
  // OML's keys: torchvision's MLP numbers Linear 0, Sigmoid 1, Dropout 2, Linear 3.
  REQUIRE(params.count("head.0.weight"));
  CHECK(params.at("head.0.weight").sizes() == torch::IntArrayRef({8, extractor->feat_dim()}));
  CHECK(params.at("head.0.bias").sizes() == torch::IntArrayRef({8}));
  CHECK(params.at("head.3.weight").sizes() == torch::IntArrayRef({1, 8}));
  CHECK_FALSE(params.count("head.3.bias"));
  const auto i1 = torch::rand({3, 3, 8, 8}), i2 = torch::rand({3, 3, 8, 8});
  {
    torch::NoGradGuard no_grad;
    concat->eval();
    const auto embedding = extractor->forward(torch::cat({i1, i2}, 2));
    const auto expected =
        torch::sigmoid(embedding.matmul(params.at("head.0.weight").t()) + params.at("head.0.bias"))
            .matmul(params.at("head.3.weight").t())
            .squeeze(1);
    CHECK(oml::test::max_abs_diff(concat->forward(i1, i2), expected) < 1e-6);
  }
  concat->train();
  CHECK(concat->freezable());
  const auto grads_of = [&](bool frozen) {
    concat->zero_grad();
    concat->set_backbone_frozen(frozen);
    concat->forward(i1, i2).sum().backward();
    bool backbone = false, head = true;
    for (const auto& p : extractor->parameters())
      backbone = backbone || (p.grad().defined() && p.grad().abs().sum().item<double>() > 0);
    for (const auto& p : concat->named_parameters())
      if (p.key().rfind("head.", 0) == 0) head = head && p.value().grad().defined();
    return std::make_pair(backbone, head);
  };
  CHECK(grads_of(true) == std::make_pair(false, true));  // frozen: only the head learns
  CHECK(grads_of(false) == std::make_pair(true, true));
  CHECK_FALSE(LinearSiamese(4, true)->freezable());
}

TEST_CASE("Pairwise models score pairs so that smaller means more similar", "[models][pairwise]") {
  torch::NoGradGuard no_grad;
  LinearSiamese linear(4, true);
  const auto x1 = torch::randn({5, 4}), x2 = torch::randn({5, 4});
  CHECK(oml::test::max_abs_diff(linear->predict(x1, x2), (x1 - x2).norm(2, 1)) < 1e-5);

  ConvNetOptions small;
  small.channels = {4};
  ConcatSiamese concat(ConvNet(small).ptr(), std::vector<int64_t>{8}, true);
  concat->eval();
  const auto i1 = torch::rand({3, 3, 8, 8}), i2 = torch::rand({3, 3, 8, 8});
  const auto s = concat->predict(i1, i2);
  CHECK(s.sizes() == torch::IntArrayRef({3}));
  CHECK(((s > 0) & (s < 1)).all().item<bool>());
  CHECK(oml::test::max_abs_diff(s, concat->predict(i2, i1)) < 1e-6);  // swap-averaged: symmetric
  CHECK(concat->forward(i1, i2).sizes() == torch::IntArrayRef({3}));

  TrivialDistanceSiamese trivial(ConvNet(small).ptr());
  trivial->eval();
  CHECK(oml::test::max_abs_diff(trivial->predict(i1, i1), torch::zeros({3})) < 1e-5);
}

}  // namespace models_tests
