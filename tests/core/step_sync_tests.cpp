// A training step queues its work without reading a value back from the device (on CUDA a read
// stops the host until the GPU has caught up): the losses' log values stay tensors, label checks
// run on the host copy, and PendingScalars reads a step's numbers later. On the CPU the step is
// guarded by watching the ATen operations it dispatches (RecordFunction, the profiler's hook):
// the ones that read a value back or size their output by the data (`.item()`, `nonzero`,
// `unique`, boolean masks ...) are what would make a CUDA host wait, and a test fails when one is
// added back into the step. (tests/gpu counts the CUDA synchronisations of the same step.)
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "oml/common/error.h"
#include "oml/common/pending_scalars.h"
#include "oml/config/document.h"
#include "oml/losses/criterion.h"
#include "oml/models/extractor.h"
#include "oml/optim/optimizer.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace step_sync_tests {

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

// While alive, records the operations this thread dispatches that would make a CUDA host wait:
// a value read back, or an output whose size depends on the data. Reads of the labels inside
// oml::check_labels (losses::kLabelCheckScope) do not count: on the CPU they are the host check
// the pipeline makes before the labels go to a device, where forward() skips it.
class HostReads {
 public:
  HostReads() {
    active_ = this;
    handle_ =
        at::addThreadLocalCallback(at::RecordFunctionCallback(&HostReads::on_start, &HostReads::on_end)
                                       .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  }
  ~HostReads() {
    at::removeCallback(handle_);
    active_ = nullptr;
  }
  HostReads(const HostReads&) = delete;
  HostReads& operator=(const HostReads&) = delete;
  const std::vector<std::string>& seen() const { return seen_; }

 private:
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    static const std::set<std::string> reading{"aten::_local_scalar_dense",
                                               "aten::item",
                                               "aten::is_nonzero",
                                               "aten::nonzero",
                                               "aten::equal",
                                               "aten::allclose",
                                               "aten::unique",
                                               "aten::_unique",
                                               "aten::_unique2",
                                               "aten::unique_dim",
                                               "aten::unique_consecutive",
                                               "aten::masked_select",
                                               "aten::bincount"};
    const std::string name = fn.name();
    if (!active_) return nullptr;
    if (name == oml::losses::kLabelCheckScope)
      ++active_->label_checks_;
    else if (active_->label_checks_ == 0 && reading.count(name))
      active_->seen_.push_back(name);
    return nullptr;
  }
  static void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
    if (active_ && std::string(fn.name()) == oml::losses::kLabelCheckScope) --active_->label_checks_;
  }
  static thread_local HostReads* active_;
  at::CallbackHandle handle_ = 0;
  int label_checks_ = 0;
  std::vector<std::string> seen_;
};
thread_local HostReads* HostReads::active_ = nullptr;

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
  // The batch-shape checks that need label values: triplets in their rows. (surrogate_precision
  // takes any batch, as OML's: every item is its own positive.)
  CHECK_THROWS_WITH(criterion("{name: triplet_plain}", 4, 3)->check_labels(torch::tensor({0, 0, 1, 1, 2, 2})),
                    Contains("triplet 1 (rows 3..5) has labels 1, 2, 2"));
  CHECK_NOTHROW(criterion("{name: surrogate_precision}", 4, 3)->check_labels(torch::arange(3)));
}

TEST_CASE("The default job's step (conv_net, ArcFace, backward, Adam) reads nothing back from its device",
          "[step_sync]") {
  torch::manual_seed(3);
  auto extractor = oml::registries().extractors.create(
      component("extractor", "{name: conv_net, args: {in_channels: 1, channels: [8, 16], feat_dim: 16}}"));
  auto loss = criterion("{name: arcface, args: {m: 0.5, s: 30}}", extractor->feat_dim(), 10);
  auto optimizer = oml::registries().optimizers.create(
      component("optimizer", "{name: adam, args: {lr: 0.001}}"),
      oml::optim::OptimizerContext{extractor->parameters(), loss->parameters()});
  extractor->train();
  const auto labels = torch::arange(10).repeat_interleave(2);
  loss->check_labels(labels);  // on the host, as the pipeline does before the copy
  const auto images = torch::randn({20, 1, 28, 28});
  for (int step = 0; step < 2; ++step) {  // the second finds Adam's state in place
    std::optional<HostReads> reads(std::in_place);
    oml::optim::zero_grad(*optimizer);
    const auto out = loss->forward(extractor->forward(images), labels);
    out.loss.backward();
    optimizer->step();
    INFO("step " << step + 1);
    CHECK(reads->seen() == std::vector<std::string>{});
    reads.reset();
    // The step's line is taken as the trainer takes it (PendingScalars queues the copy of device
    // values; values on the CPU, as here, it reads at once, which costs nothing there).
    REQUIRE(out.logs.count("accuracy") == 1);
    std::vector<at::Tensor> values{out.loss.detach()};
    for (const auto& kv : out.logs) values.push_back(kv.second);
    CHECK(oml::PendingScalars(values).size() == 2);
  }
}

TEST_CASE("The losses' log values are tensors, and their forward reads nothing back", "[step_sync]") {
  torch::manual_seed(4);
  const auto embeddings = torch::randn({12, 8}, torch::requires_grad());
  const auto labels = torch::arange(4).repeat_interleave(3);
  // Rows 3i..3i+2 of these are triplets (anchor, positive, negative), as triplet_plain expects.
  const auto triplet_labels = torch::tensor({0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0});
  for (const std::string yaml :
       {"{name: triplet_plain, args: {margin: 0.1}}", "{name: proxy_nca}", "{name: surrogate_precision}",
        "{name: cosface}", "{name: sub_center_arcface}", "{name: proxy_anchor}", "{name: soft_triple}",
        "{name: mlp_arcface, args: {mlp_features: [8]}}",
        "{name: triplet_with_miner, args: {margin: 0.1, miner: {name: hard_triplets}}}",
        "{name: triplet_with_miner, args: {margin: 0.1, miner: {name: n_hard_triplets, args: {n_positive: 2, "
        "n_negative: [2, 4]}}}}",
        "{name: contrastive}", "{name: multi_similarity}", "{name: supcon}", "{name: ntxent}",
        "{name: circle}", "{name: supcon, args: {miner: {name: multi_similarity, args: {epsilon: 0.1}}}}"}) {
    INFO(yaml);
    auto loss = criterion(yaml, 8, 4);
    const auto& batch_labels = yaml.find("triplet_plain") != std::string::npos ? triplet_labels : labels;
    loss->check_labels(batch_labels);
    const HostReads reads;
    const auto out = loss->forward(embeddings, batch_labels);
    out.loss.backward();
    CHECK(reads.seen() == std::vector<std::string>{});
    for (const auto& [key, value] : out.logs) {
      INFO(key);
      CHECK(value.numel() == 1);
    }
  }
}

TEST_CASE("miner_with_bank mines batch and bank reading nothing back", "[step_sync]") {
  // Its anchors are the batch's rows by construction (mine_anchored), its label checks run on the
  // host copies it keeps of the bank's labels: no `nonzero` to keep the batch's triplets.
  torch::manual_seed(4);
  const auto labels = torch::arange(4).repeat_interleave(3);
  for (const std::string inner :
       {"{name: hard_triplets}", "{name: n_hard_triplets, args: {n_positive: 2}}"}) {
    INFO(inner);
    auto loss = criterion(
        "{name: triplet_with_miner, args: {margin: 0.1, miner: {name: miner_with_bank, args: "
        "{bank_size_in_batches: 2, miner: " +
            inner + "}}}}",
        8, 4);
    for (int step = 0; step < 4; ++step) {  // the bank joins at the third batch
      const auto embeddings = torch::randn({12, 8}, torch::requires_grad());
      loss->check_labels(labels);
      const HostReads reads;
      const auto out = loss->forward(embeddings, labels);
      out.loss.backward();
      CHECK(reads.seen() == std::vector<std::string>{});
      CHECK(std::isfinite(out.loss.item<double>()));
    }
  }
}

}  // namespace step_sync_tests
