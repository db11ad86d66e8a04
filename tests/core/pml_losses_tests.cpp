// pytorch-metric-learning's losses against PML itself: tests/python/pml_reference.py computes the
// loss and its gradient for batches (three seeds per case, with anchors that have no positive);
// oml-cpp builds the same loss from the same args through the registry and must agree to 1e-5.
// A loss with weights of its own (proxies, class weights) loads the weights PML initialised, and
// their gradient must agree too.
#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/losses/criterion.h"
#include "oml/losses/miner.h"
#include "oml/losses/pair_losses.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"
#include "training/trainer.h"

namespace pml_losses_tests {

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
    {"circle", "{name: circle}"},
    {"circle_args", "{name: circle, args: {m: 0.25, gamma: 128}}"},
    {"contrastive_cosine", "{name: contrastive, args: {distance: cosine, pos_margin: 0.9, neg_margin: 0.1}}"},
    {"contrastive_raw",
     "{name: contrastive, args: {distance: euclidean, normalize_embeddings: false, neg_margin: 8}}"},
    {"contrastive_miner",
     "{name: contrastive, args: {miner: {name: multi_similarity, args: {epsilon: 0.2, distance: "
     "euclidean}}}}"},
    {"multi_similarity_miner", "{name: multi_similarity, args: {miner: {name: multi_similarity}}}"},
    {"multi_similarity_squared",
     "{name: multi_similarity, args: {distance: squared_euclidean, base: 1, alpha: 1, beta: 4}}"},
    {"supcon_euclidean", "{name: supcon, args: {distance: euclidean}}"},
    {"supcon_miner", "{name: supcon, args: {miner: {name: multi_similarity, args: {epsilon: 0.3}}}}"},
    {"ntxent_dot", "{name: ntxent, args: {distance: dot, normalize_embeddings: false, temperature: 10}}"},
    {"ntxent_miner", "{name: ntxent, args: {miner: {name: multi_similarity}}}"},
    {"circle_miner", "{name: circle, args: {miner: {name: multi_similarity, args: {epsilon: 0.5}}}}"},
};

// The cases with weights of their own: the `criterion:` and the weights' parameter name. The
// default cases leave num_classes and embedding_size to the run (kRun), the others state them.
struct WeightedCase {
  std::string name, yaml, weights;
};
const std::vector<WeightedCase> kWeightedCases{
    {"proxy_anchor", "{name: proxy_anchor}", "proxies"},
    {"proxy_anchor_args",
     "{name: proxy_anchor, args: {num_classes: 10, embedding_size: 16, margin: 0.2, alpha: 16}}", "proxies"},
    {"proxy_nca", "{name: proxy_nca}", "proxies"},
    {"proxy_nca_scale", "{name: proxy_nca, args: {num_classes: 10, embedding_size: 16, softmax_scale: 8}}",
     "proxies"},
    {"proxy_anchor_euclidean", "{name: proxy_anchor, args: {distance: euclidean, alpha: 8}}", "proxies"},
    {"proxy_nca_cosine", "{name: proxy_nca, args: {distance: cosine, softmax_scale: 4}}", "proxies"},
    {"cosface", "{name: cosface}", "W"},
    {"cosface_args", "{name: cosface, args: {num_classes: 10, embedding_size: 16, margin: 0.2, scale: 30}}",
     "W"},
    {"sub_center_arcface", "{name: sub_center_arcface}", "W"},
    {"sub_center_arcface_args",
     "{name: sub_center_arcface, args: {num_classes: 10, embedding_size: 16, margin: 20, scale: 30, "
     "sub_centers: 2}}",
     "W"},
    {"soft_triple", "{name: soft_triple}", "fc"},
    {"soft_triple_args",
     "{name: soft_triple, args: {num_classes: 10, embedding_size: 16, centers_per_class: 4, la: 10, gamma: "
     "0.2, "
     "margin: 0.05}}",
     "fc"},
};

// The run the reference batches come from: 16-dimensional embeddings, 10 train labels.
const oml::losses::CriterionContext kRun{16, 10};

std::shared_ptr<oml::losses::Criterion> criterion(const std::string& yaml,
                                                  const oml::losses::CriterionContext& context = {}) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("criterion: " + yaml + "\n", "pml.yaml");
  return oml::registries().losses.create(oml::config::parse_component(doc.root()["criterion"], "criterion"),
                                         context);
}

torch::Tensor parameter(oml::losses::Criterion& loss, const std::string& name) {
  const auto parameters = loss.named_parameters();
  REQUIRE(parameters.contains(name));
  return parameters[name];
}

const std::filesystem::path& references() {
  return oml::test::reference_export("pml_reference.py", "export");
}

}  // namespace

TEST_CASE("PML's contrastive, multi-similarity, supcon and ntxent losses: value and gradient equal to PML's",
          "[losses][pml]") {
  const auto& dir = references();
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
        CHECK(out.logs.at("pos_loss").item<double>() + out.logs.at("neg_loss").item<double>() ==
              Approx(out.loss.item<double>()).margin(1e-6));
      }
    }
  }
}

TEST_CASE("PML's multi-similarity miner selects PML's pairs, with each distance", "[losses][pml]") {
  oml::cli::register_builtins();
  const auto& dir = references();
  int checked = 0;
  for (const auto& [name, yaml] : kCases) {
    if (yaml.find("miner:") == std::string::npos) continue;
    const auto doc = oml::config::Document::from_string("criterion: " + yaml + "\n", "pml.yaml");
    const auto miner =
        std::dynamic_pointer_cast<oml::losses::PairSelectionMiner>(oml::registries().miners.create(
            oml::config::parse_component(doc.root()["criterion"]["args"]["miner"], "miner")));
    REQUIRE(miner != nullptr);
    for (const int seed : {0, 1, 2}) {
      const std::string prefix = name + "_" + std::to_string(seed);
      INFO(prefix << ": " << yaml);
      const auto expected = oml::io::load_tensor(dir / (prefix + "_mined.pt"));
      const auto labels = oml::io::load_tensor(dir / (prefix + "_labels.pt"));
      const auto mined = miner->mine(oml::io::load_tensor(dir / (prefix + "_embeddings.pt")), labels);
      CHECK(torch::equal(mined.positive, expected[0]));
      CHECK(torch::equal(mined.negative, expected[1]));
      // A selection, not every pair: some negatives are left out.
      const auto negatives = (labels.unsqueeze(0) != labels.unsqueeze(1)).sum();
      CHECK(mined.negative.sum().item<int64_t>() < negatives.item<int64_t>());
      ++checked;
    }
  }
  CHECK(checked == 15);
}

TEST_CASE("PML's proxy and margin softmax losses: value and gradients equal to PML's, its weights loaded",
          "[losses][pml]") {
  const auto& dir = references();
  for (const auto& c : kWeightedCases) {
    for (const int seed : {0, 1, 2}) {
      const std::string prefix = c.name + "_" + std::to_string(seed);
      INFO(prefix << ": " << c.yaml);
      const auto embeddings = oml::io::load_tensor(dir / (prefix + "_embeddings.pt")).requires_grad_(true);
      const auto labels = oml::io::load_tensor(dir / (prefix + "_labels.pt"));
      const double expected = oml::io::load_tensor(dir / (prefix + "_loss.pt")).item<double>();
      const auto expected_grad = oml::io::load_tensor(dir / (prefix + "_grad.pt"));
      const auto loss = criterion(c.yaml, kRun);
      auto weights = parameter(*loss, c.weights);
      {
        const auto pml_weights = oml::io::load_tensor(dir / (prefix + "_weights.pt"));
        REQUIRE(weights.sizes() == pml_weights.sizes());  // PML's shape, so its state_dict loads
        torch::NoGradGuard no_grad;
        weights.copy_(pml_weights);
      }
      const auto out = loss->forward(embeddings, labels);
      out.loss.backward();
      CHECK(out.loss.item<double>() == Approx(expected).margin(1e-5));
      CHECK(max_abs_diff(embeddings.grad(), expected_grad) <= 1e-5);
      CHECK(max_abs_diff(weights.grad(), oml::io::load_tensor(dir / (prefix + "_weights_grad.pt"))) <= 1e-5);
      if (out.logs.count("pos_loss") > 0) {
        CHECK(out.logs.at("pos_loss").item<double>() + out.logs.at("neg_loss").item<double>() ==
              Approx(out.loss.item<double>()).margin(1e-5));
      }
    }
  }
}

TEST_CASE("PML's losses compute in float32 under bf16 autocast", "[losses][pml]") {
  torch::manual_seed(3);
  const auto embeddings = torch::randn({24, 16});
  const auto labels = torch::arange(6).repeat_interleave(4);
  std::vector<std::pair<std::string, std::string>> cases = kCases;
  for (const auto& c : kWeightedCases) cases.emplace_back(c.name, c.yaml);
  for (const auto& [name, yaml] : cases) {
    INFO(name);
    const auto loss = criterion(yaml, kRun);
    const auto rounded = embeddings.to(torch::kBFloat16);
    const double fp32 = loss->forward(rounded.to(torch::kFloat), labels).loss.item<double>();
    const oml::AutocastGuard autocast(oml::config::Precision::bf16, torch::kCPU);
    const auto out = loss->forward(rounded, labels);
    CHECK(out.loss.scalar_type() == torch::kFloat);
    CHECK(out.loss.item<double>() == Approx(fp32).margin(1e-6));
  }
}

TEST_CASE("PML's losses check their args and their batches", "[losses][pml]") {
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
  // The same check on host labels, before they go to the device (Criterion::check_labels).
  for (const std::string name : {"contrastive", "multi_similarity", "supcon", "ntxent", "circle"}) {
    INFO(name);
    CHECK_THROWS_WITH(criterion("{name: " + name + "}")->check_labels(torch::arange(4)),
                      Contains(name + ": no item of the batch (4 items)"));
    CHECK_NOTHROW(criterion("{name: " + name + "}")->check_labels(torch::tensor({0, 1, 0})));
  }
  // Distances: a name outside the four, a loss PML ties to cosine, cosine without normalising.
  CHECK_THROWS_WITH(
      criterion("{name: supcon, args: {distance: manhattan}}"),
      Contains("criterion.args.distance") &&
          Contains("expected one of euclidean, squared_euclidean, cosine, dot, got 'manhattan'"));
  CHECK_THROWS_WITH(criterion("{name: circle, args: {distance: euclidean}}"),
                    Contains("criterion.args.distance: loss 'circle': distance must be cosine"));
  CHECK_THROWS_WITH(criterion("{name: ntxent, args: {distance: cosine, normalize_embeddings: false}}"),
                    Contains("criterion.args.normalize_embeddings") && Contains("use `distance: dot`"));
  // Miners: a triplet miner is the wrong kind; a bad epsilon names the miner's key.
  CHECK_THROWS_WITH(criterion("{name: contrastive, args: {miner: {name: hard_triplets}}}"),
                    Contains("loss 'contrastive' needs a miner that selects pairs (multi_similarity), but "
                             "miner 'hard_triplets' produces triplets"));
  CHECK_THROWS_WITH(criterion("{name: supcon, args: {miner: {name: multi_similarity, args: {epsilon: -1}}}}"),
                    Contains("criterion.args.miner.args.epsilon") && Contains("epsilon must be >= 0"));
  CHECK_THROWS_WITH(
      criterion("{name: triplet_with_miner, args: {miner: {name: multi_similarity}}}"),
      Contains("needs a triplet miner, but miner 'multi_similarity' produces pairs for PML's pair losses"));
  // A miner that selects nothing hard: PML's zero loss, still attached to the graph.
  const auto mined =
      criterion("{name: multi_similarity, args: {miner: {name: multi_similarity, args: {epsilon: 0}}}}");
  const auto far =
      torch::tensor({{1.0F, 0.0F}, {1.0F, 0.01F}, {-1.0F, 0.0F}, {-1.0F, 0.01F}}).requires_grad_(true);
  const auto out = mined->forward(far, torch::tensor({0, 0, 1, 1}));
  CHECK(out.loss.item<double>() == 0.0);
  out.loss.backward();
  CHECK(far.grad().defined());
  // Every pair loss chooses that zero on the device, beside a loss computed on the (empty) pair
  // sets: its value, logs and gradient are 0, not NaN.
  for (const std::string name : {"contrastive", "multi_similarity", "supcon", "ntxent", "circle"}) {
    INFO(name);
    const auto x = far.detach().clone().requires_grad_(true);
    const auto zero =
        criterion("{name: " + name + ", args: {miner: {name: multi_similarity, args: {epsilon: 0}}}}")
            ->forward(x, torch::tensor({0, 0, 1, 1}));
    CHECK(zero.loss.item<double>() == 0.0);
    for (const auto& [key, value] : zero.logs) CHECK(value.item<double>() == 0.0);
    zero.loss.backward();
    CHECK(torch::equal(x.grad(), torch::zeros_like(x)));
  }
}

TEST_CASE("PML's losses with class weights take num_classes and embedding_size from the run",
          "[losses][pml]") {
  for (const auto& c : kWeightedCases) {
    INFO(c.name);
    const auto loss = criterion(c.yaml, {24, 7});
    const bool stated = c.yaml.find("num_classes") != std::string::npos;
    const auto weights = parameter(*loss, c.weights);
    // proxies are [classes, size]; W and fc are [size, classes x centres] as in PML.
    const int64_t size = c.weights == "proxies" ? weights.size(1) : weights.size(0);
    const int64_t columns = c.weights == "proxies" ? weights.size(0) : weights.size(1);
    CHECK(size == (stated ? 16 : 24));
    const int64_t centres = c.name == "sub_center_arcface" ? 3 : c.name == "soft_triple" ? 10 : 1;
    if (!stated) CHECK(columns == 7 * centres);
    // Their weights are the module's parameters: optimised with loss_lr and in checkpoints.
    CHECK(loss->parameters().size() == 1);
  }
  // A run with one label is a data error naming the loss, not a crash.
  CHECK_THROWS_AS(criterion("{name: proxy_anchor}", {16, 1}), oml::DataError);
  CHECK_THROWS_WITH(criterion("{name: cosface}", {16, 1}),
                    Contains("loss 'cosface': the training set has 1 label(s)"));
}

TEST_CASE("PML's losses with class weights check their args and their batches", "[losses][pml]") {
  CHECK_THROWS_WITH(criterion("{name: proxy_anchor, args: {alpha: 0}}", kRun),
                    Contains("pml.yaml:1:47: criterion.args.alpha: loss 'proxy_anchor': alpha must be > 0"));
  CHECK_THROWS_WITH(criterion("{name: proxy_nca, args: {num_classes: 1}}", kRun),
                    Contains("criterion.args.num_classes") && Contains("num_classes must be >= 2"));
  CHECK_THROWS_WITH(criterion("{name: cosface, args: {embedding_size: -3}}", kRun),
                    Contains("criterion.args.embedding_size") && Contains("embedding_size must be > 0"));
  CHECK_THROWS_WITH(
      criterion("{name: sub_center_arcface, args: {margin: 200}}", kRun),
      Contains("criterion.args.margin") && Contains("margin must be in [0, 180) degrees, got 200"));
  CHECK_THROWS_WITH(criterion("{name: sub_center_arcface, args: {sub_centers: 0}}", kRun),
                    Contains("criterion.args.sub_centers") && Contains("sub_centers must be >= 1"));
  CHECK_THROWS_WITH(
      criterion("{name: soft_triple, args: {centers_per_class: 0}}", kRun),
      Contains("criterion.args.centers_per_class") && Contains("centers_per_class must be >= 1"));
  CHECK_THROWS_WITH(criterion("{name: soft_triple, args: {gamma: 0}}", kRun),
                    Contains("criterion.args.gamma") && Contains("gamma must be > 0"));
  CHECK_THROWS_WITH(criterion("{name: circle, args: {m: 1.5}}"),
                    Contains("criterion.args.m: loss 'circle': m must be in [0, 1), got 1.5"));
  CHECK_THROWS_WITH(criterion("{name: cosface, args: {s: 30}}", kRun), Contains("unknown key 's'"));
  // Labels beyond num_classes and embeddings of another size are data errors naming the loss.
  const auto loss = criterion("{name: proxy_anchor}", kRun);
  CHECK_THROWS_AS(loss->forward(torch::randn({4, 16}), torch::tensor({0, 1, 2, 10})), oml::DataError);
  CHECK_THROWS_WITH(loss->forward(torch::randn({4, 16}), torch::tensor({0, 1, 2, 10})),
                    Contains("proxy_anchor: labels must be in [0, 10), got 0..10"));
  CHECK_THROWS_WITH(criterion("{name: soft_triple}", kRun)->forward(torch::randn({4, 8}), torch::arange(4)),
                    Contains("soft_triple: expected embeddings of size 16 (embedding_size), got 8"));
}

TEST_CASE("The weights of PML's losses with class weights train with loss_lr and resume from last.ckpt",
          "[losses][pml][resume]") {
  oml::cli::register_builtins();
  // A linear extractor and the loss, trained as oml-train does: N steps, last.ckpt written as the
  // Trainer writes it, a fresh process (other initial weights) restored by restore_checkpoint,
  // M more steps; the losses must be those of N + M uninterrupted steps.
  struct Run {
    torch::nn::Linear model{8, 16};
    std::shared_ptr<oml::losses::Criterion> loss;
    std::shared_ptr<torch::optim::Optimizer> optimizer;
  };
  torch::manual_seed(5);
  const auto inputs = torch::randn({9, 27, 8});
  const auto labels = torch::arange(9).repeat_interleave(3);
  const auto steps = [&](Run& run, int64_t from, int64_t to) {
    std::vector<double> losses;
    for (int64_t i = from; i < to; ++i) {
      const auto out = run.loss->forward(run.model->forward(inputs[i]), labels);
      run.optimizer->zero_grad();
      out.loss.backward();
      run.optimizer->step();
      losses.push_back(out.loss.item<double>());
    }
    return losses;
  };
  for (const auto& c : kWeightedCases) {
    INFO(c.name);
    const std::string yaml = "dataset_root: d\ncriterion: " + c.yaml +
                             "\noptimizer: {name: adam, args: {lr: 0.001, loss_lr: 0.05}}\n";
    const auto document = oml::config::Document::from_string(yaml, "train.yaml");
    const auto config = oml::config::parse_run_config(document.root());
    const auto make = [&](int seed) {
      torch::manual_seed(seed);
      Run run;
      run.loss = oml::registries().losses.create(*config.criterion, kRun);
      oml::optim::OptimizerContext context;
      context.model_parameters = run.model->parameters();
      context.loss_parameters = run.loss->parameters();
      run.optimizer = oml::registries().optimizers.create(*config.optimizer, context);
      return run;
    };
    Run run = make(1);
    const auto initial = parameter(*run.loss, c.weights).detach().clone();
    REQUIRE(run.optimizer->param_groups().size() == 2);
    CHECK(run.optimizer->param_groups()[1].options().get_lr() == 0.05);
    steps(run, 0, 5);
    CHECK(max_abs_diff(parameter(*run.loss, c.weights), initial) > 1e-3);  // they train

    TempDir dir;
    oml::io::Checkpoint checkpoint;
    checkpoint.state_dict = oml::io::state_dict(*run.model);
    checkpoint.config = yaml;
    checkpoint.epoch = 1;
    oml::io::ResumeState resume;
    resume.optimizer = oml::optim::save_optimizer_state(*run.optimizer);
    resume.scheduler = c10::IValue(c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
    resume.criterion = oml::io::state_dict(*run.loss);
    resume.sampler_epoch = 1;
    resume.rng = oml::optim::save_rng_state();
    checkpoint.resume = resume;
    const std::string path = (dir / "last.ckpt").string();
    oml::io::save_checkpoint(path, checkpoint);
    // The criterion's entry holds the weights under PML's name.
    CHECK(oml::io::load_checkpoint(path).resume->criterion.count(c.weights) == 1);
    const auto uninterrupted = steps(run, 5, 9);

    Run resumed = make(99);
    CHECK(max_abs_diff(parameter(*resumed.loss, c.weights), initial) > 1e-3);  // other initial weights
    oml::pipelines::TrainingParts parts;
    parts.model = resumed.model.ptr().get();
    parts.criterion = resumed.loss.get();
    parts.optimizer = resumed.optimizer.get();
    oml::pipelines::restore_checkpoint(path, config, parts, nullptr);
    CHECK(steps(resumed, 5, 9) == uninterrupted);
  }
}

}  // namespace pml_losses_tests
