// pytorch-metric-learning's losses against PML itself: tests/python/pml_reference.py computes the
// loss and its gradient for batches (three seeds per case, with anchors that have no positive);
// oml-cpp builds the same loss from the same args through the registry and must agree to 1e-5.
#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/config/document.h"
#include "oml/io/torch_file.h"
#include "oml/losses/criterion.h"
#include "oml/losses/pair_losses.h"
#include "oml/registry/registries.h"
#include "support/support.h"

using Catch::Matchers::Contains;
using oml::test::max_abs_diff;
using oml::test::TempDir;

namespace {

// The `criterion:` of each case of pml_reference.py, as a user writes it.
const std::vector<std::pair<std::string, std::string>> kCases{
    {"contrastive", "{name: contrastive}"},
    {"contrastive_margins", "{name: contrastive, args: {pos_margin: 0.25, neg_margin: 0.8}}"},
    {"multi_similarity", "{name: multi_similarity}"},
    {"multi_similarity_args", "{name: multi_similarity, args: {alpha: 3, beta: 40, base: 0.4}}"},
    {"supcon", "{name: supcon}"},
    {"supcon_temperature", "{name: supcon, args: {temperature: 0.5}}"},
    {"ntxent", "{name: ntxent}"},
    {"ntxent_temperature", "{name: ntxent, args: {temperature: 0.2}}"},
};

std::shared_ptr<oml::losses::Criterion> criterion(const std::string& yaml) {
  oml::register_core_components();
  const auto doc = oml::config::Document::from_string("criterion: " + yaml + "\n", "pml.yaml");
  return oml::registries().losses.create(oml::config::parse_component(doc.root()["criterion"], "criterion"),
                                         oml::losses::CriterionContext{});
}

void export_references(const TempDir& dir) {
  const std::string script = oml::test::source_path("tests/python/pml_reference.py");
  const auto result = oml::test::run(oml::test::python() + " " + oml::test::quote(script) + " export " +
                                     oml::test::quote(dir.path().string()));
  INFO("pml_reference.py failed (is pytorch-metric-learning installed? scripts/setup.sh --with-tests)\n"
       << result.out << result.err);
  REQUIRE(result.exit_code == 0);
}

}  // namespace

TEST_CASE("PML's contrastive, multi-similarity, supcon and ntxent losses: value and gradient equal to PML's",
          "[losses][pml]") {
  TempDir dir;
  export_references(dir);
  for (const auto& [name, yaml] : kCases) {
    for (const int seed : {0, 1, 2}) {
      const std::string prefix = name + "_" + std::to_string(seed);
      INFO(prefix << ": " << yaml);
      const auto embeddings = oml::io::load_tensor(dir / (prefix + "_embeddings.pt")).requires_grad_(true);
      const auto labels = oml::io::load_tensor(dir / (prefix + "_labels.pt"));
      const double expected = oml::io::load_tensor(dir / (prefix + "_loss.pt")).item<double>();
      const auto expected_grad = oml::io::load_tensor(dir / (prefix + "_grad.pt"));
      const auto out = criterion(yaml)->forward(embeddings, labels);
      out.loss.backward();
      CHECK(out.loss.item<double>() == Approx(expected).margin(1e-5));
      CHECK(max_abs_diff(embeddings.grad(), expected_grad) <= 1e-5);
      // The logged terms of contrastive and multi-similarity add up to the loss.
      if (out.logs.count("pos_loss") > 0) {
        CHECK(out.logs.at("pos_loss") + out.logs.at("neg_loss") ==
              Approx(out.loss.item<double>()).margin(1e-6));
      }
    }
  }
}

TEST_CASE("PML's pair losses compute in float32 under bf16 autocast", "[losses][pml]") {
  torch::manual_seed(3);
  const auto embeddings = torch::randn({24, 16});
  const auto labels = torch::arange(6).repeat_interleave(4);
  for (const auto& [name, yaml] : kCases) {
    INFO(name);
    const auto loss = criterion(yaml);
    const auto rounded = embeddings.to(torch::kBFloat16);
    const double fp32 = loss->forward(rounded.to(torch::kFloat), labels).loss.item<double>();
    const oml::AutocastGuard autocast(oml::config::Precision::bf16, torch::kCPU);
    const auto out = loss->forward(rounded, labels);
    CHECK(out.loss.scalar_type() == torch::kFloat);
    CHECK(out.loss.item<double>() == Approx(fp32).margin(1e-6));
  }
}

TEST_CASE("PML's pair losses check their args and their batches", "[losses][pml]") {
  CHECK_THROWS_WITH(
      criterion("{name: contrastive, args: {neg_margin: -1}}"),
      Contains("pml.yaml:1:51: criterion.args.neg_margin: loss 'contrastive': neg_margin must be >= 0"));
  CHECK_THROWS_WITH(criterion("{name: multi_similarity, args: {alpha: 0, beta: 1}}"),
                    Contains("criterion.args.alpha") && Contains("alpha must be > 0"));
  CHECK_THROWS_WITH(criterion("{name: multi_similarity, args: {gamma: 1}}"), Contains("unknown key 'gamma'"));
  CHECK_THROWS_WITH(criterion("{name: ntxent, args: {temperature: 0}}"),
                    Contains("criterion.args.temperature: loss 'ntxent': temperature must be > 0"));
  // A batch without a positive pair: a data error, not a silent push-apart-only step.
  const auto loss = criterion("{name: contrastive}");
  CHECK_THROWS_AS(loss->forward(torch::randn({4, 3}), torch::arange(4)), oml::DataError);
  CHECK_THROWS_WITH(loss->forward(torch::randn({4, 3}), torch::arange(4)), Contains("no item of the batch"));
}
