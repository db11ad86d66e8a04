// A training step queues its work without reading a value back from the device (on CUDA a read
// stops the host until the GPU has caught up): the losses' log values stay tensors, label checks
// run on the host copy, and PendingScalars reads a step's numbers later. The meta device guards
// it on the CPU: its tensors have no data, so `.item()`, `nonzero` or a copy to the CPU throws
// there, and a read added back into the step fails these tests. (tests/gpu counts the CUDA
// synchronisations of the same step.)
#include <torch/torch.h>
#include <torch/version.h>

#include "oml/common/error.h"
#include "oml/common/pending_scalars.h"
#include "oml/config/document.h"
#include "oml/losses/criterion.h"
#include "oml/models/extractor.h"
#include "oml/optim/optimizer.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

using Catch::Matchers::Contains;

namespace {

oml::config::ComponentSpec component(const std::string& key, const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(key + ": " + yaml + "\n", "step.yaml");
  return oml::config::parse_component(doc.root()[key], key);
}

std::shared_ptr<oml::losses::Criterion> criterion(const std::string& yaml, int64_t dim, int64_t classes) {
  oml::losses::CriterionContext context;
  context.embedding_size = dim;
  context.num_classes = classes;
  return oml::registries().losses.create(component("criterion", yaml), context);
}

}  // namespace

TEST_CASE("PendingScalars reads its values in order as doubles, whatever their dtype", "[step_sync]") {
  oml::PendingScalars values(std::vector<at::Tensor>{torch::tensor(0.25f), torch::tensor(int64_t{7}),
                                                     torch::tensor({true}),
                                                     torch::scalar_tensor(1e-300, torch::kDouble)});
  CHECK(values.size() == 4);
  CHECK(values.read() == std::vector<double>{0.25, 7.0, 1.0, 1e-300});
  CHECK(values.read() == std::vector<double>{0.25, 7.0, 1.0, 1e-300});  // read once, kept
  CHECK(oml::PendingScalars().read().empty());
}

TEST_CASE("PendingScalars takes tensors of one element only", "[step_sync]") {
  using Values = std::vector<at::Tensor>;
  CHECK_THROWS_AS(oml::PendingScalars(Values{torch::zeros({2})}), oml::UsageError);
  CHECK_THROWS_WITH(oml::PendingScalars(Values{torch::zeros({}), torch::zeros({0})}),
                    Contains("value 1 must be a tensor of one element, got 0 elements"));
  CHECK_THROWS_WITH(oml::PendingScalars(Values{at::Tensor()}), Contains("an undefined tensor"));
}

TEST_CASE("The losses' label checks run on host labels, before the labels go to the device", "[step_sync]") {
  auto arcface = criterion("{name: arcface, args: {m: 0.5, s: 30}}", 4, 3);
  CHECK_NOTHROW(arcface->check_labels(torch::tensor({0, 2, 1}, torch::kLong)));
  CHECK_THROWS_WITH(arcface->check_labels(torch::tensor({0, 3}, torch::kLong)),
                    Contains("labels must be in [0, 3), got 0..3"));
  // Labels on the CPU: forward() checks them itself, as before.
  CHECK_THROWS_AS(arcface->forward(torch::randn({2, 4}), torch::tensor({0, 3}, torch::kLong)),
                  oml::DataError);
  auto proxy = criterion("{name: proxy_anchor}", 4, 3);
  CHECK_THROWS_WITH(proxy->check_labels(torch::tensor({-1, 2}, torch::kLong)), Contains("got -1..2"));
}

#if TORCH_VERSION_MAJOR >= 2  // 1.13's meta device lacks kernels the step uses (convolution's)
TEST_CASE("The default job's step (conv_net, ArcFace, backward, Adam) reads nothing back from its device",
          "[step_sync]") {
  const torch::Device meta(torch::kMeta);
  torch::manual_seed(3);
  auto extractor = oml::registries().extractors.create(
      component("extractor", "{name: conv_net, args: {in_channels: 1, channels: [8, 16], feat_dim: 16}}"));
  auto loss = criterion("{name: arcface, args: {m: 0.5, s: 30}}", extractor->feat_dim(), 10);
  extractor->to(meta);
  loss->to(meta);
  auto optimizer = oml::registries().optimizers.create(
      component("optimizer", "{name: adam, args: {lr: 0.001}}"),
      oml::optim::OptimizerContext{extractor->parameters(), loss->parameters()});
  extractor->train();
  const auto host_labels = torch::arange(10).repeat_interleave(2);
  loss->check_labels(host_labels);        // on the host, as the pipeline does before the copy
  for (int step = 0; step < 2; ++step) {  // the second finds Adam's state in place
    oml::optim::zero_grad(*optimizer);
    const auto out =
        loss->forward(extractor->forward(torch::randn({20, 1, 28, 28}, meta)),
                      torch::empty({20}, torch::TensorOptions().dtype(torch::kLong).device(meta)));
    out.loss.backward();
    optimizer->step();
    CHECK(out.loss.device() == meta);
    REQUIRE(out.logs.count("accuracy") == 1);
    CHECK(out.logs.at("accuracy").device() == meta);
    // The step's line is taken as the trainer takes it: the copy is queued, nothing is read.
    std::vector<at::Tensor> values{out.loss.detach()};
    for (const auto& kv : out.logs) values.push_back(kv.second);
    CHECK(oml::PendingScalars(values).size() == 2);
  }
  // A read is what the meta device refuses: the guard above would catch one.
  CHECK_THROWS(torch::zeros({1}, meta).item<double>());
}

TEST_CASE("The losses' log values are tensors left on the loss's device", "[step_sync]") {
  const torch::Device meta(torch::kMeta);
  const auto embeddings = torch::empty({12, 8}, meta);
  const auto labels = torch::empty({12}, torch::TensorOptions().dtype(torch::kLong).device(meta));
  for (const std::string yaml : {"{name: cosface}", "{name: sub_center_arcface}", "{name: proxy_anchor}",
                                 "{name: soft_triple}", "{name: mlp_arcface, args: {mlp_features: [8]}}"}) {
    INFO(yaml);
    auto loss = criterion(yaml, 8, 4);
    loss->to(meta);
    const auto out = loss->forward(embeddings, labels);
    CHECK(out.loss.device() == meta);
    for (const auto& [key, value] : out.logs) {
      INFO(key);
      CHECK(value.device() == meta);
      CHECK(value.numel() == 1);
    }
  }
}
#endif
