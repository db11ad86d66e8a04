// OML's own losses against OML's code: tests/python/oml_losses_reference.py (which carries OML's
// TripletLoss, TripletLossPlain, ArcFaceLoss and ArcFaceLossWithMLP) computes the loss and its
// gradients for batches (three seeds per case); oml-cpp builds the same loss from OML's args
// through the registry, loads the weights OML initialised (OML's state-dict names) and must agree
// to 1e-5, the gradients of the weights included.
#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/data/dataframe.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/losses/criterion.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"
#include "training/trainer.h"

namespace oml_losses_tests {

using Catch::Matchers::Contains;
using oml::test::max_abs_diff;
using oml::test::TempDir;

namespace {

// The `criterion:` of each case of oml_losses_reference.py, with OML's args as a user writes them.
const std::vector<std::pair<std::string, std::string>> kTripletCases{
    {"triplet", "{name: triplet, args: {margin: 0.2}}"},
    {"triplet_soft", "{name: triplet, args: {margin: null, reduction: mean}}"},
    {"triplet_sum", "{name: triplet, args: {margin: 1.0, reduction: sum, need_logs: true}}"},
    {"triplet_plain", "{name: triplet_plain, args: {margin: 0.2}}"},
    {"triplet_plain_soft", "{name: triplet_plain, args: {margin: null, reduction: mean}}"},
    {"triplet_plain_sum", "{name: triplet_plain, args: {margin: 1.0, reduction: sum}}"},
};
// The cases with weights of their own; the default ones leave in_features and num_classes to the
// run (kRun), as oml-cpp allows, the others state them as OML's configs do.
const std::vector<std::pair<std::string, std::string>> kWeightedCases{
    {"arcface", "{name: arcface}"},
    {"arcface_args",
     "{name: arcface, args: {in_features: 16, num_classes: 10, m: 0.4, s: 30, smoothing_epsilon: 0.1, "
     "reduction: sum}}"},
    {"arcface_categories", "{name: arcface, args: {smoothing_epsilon: 0.2}}"},
    {"mlp_arcface", "{name: mlp_arcface, args: {mlp_features: [32, 24]}}"},
    {"mlp_arcface_one_layer",
     "{name: mlp_arcface, args: {in_features: 16, num_classes: 10, mlp_features: [12], m: 0.4, s: 30}}"},
    {"mlp_arcface_categories",
     "{name: mlp_arcface, args: {mlp_features: [20, 20, 8], smoothing_epsilon: 0.3}}"},
};

// The run the reference batches come from: 16-dimensional embeddings, 10 train labels.
const oml::losses::CriterionContext kRun{16, 10, {}};

std::shared_ptr<oml::losses::Criterion> criterion(const std::string& yaml,
                                                  const oml::losses::CriterionContext& context = kRun) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("criterion: " + yaml + "\n", "oml.yaml");
  return oml::registries().losses.create(oml::config::parse_component(doc.root()["criterion"], "criterion"),
                                         context);
}

oml::io::StateDict read_state(const std::filesystem::path& path) {
  return oml::io::find_state_dict(oml::io::read_torch_file(path), path.string());
}

const std::filesystem::path& references() {
  return oml::test::reference_export("oml_losses_reference.py", "export");
}

// A batch of 4 triplets laid out as `name` takes them, with fitting labels.
std::pair<torch::Tensor, torch::Tensor> triplet_batch(const std::string& name) {
  torch::manual_seed(3);
  const auto embeddings = torch::randn({12, 16});
  const auto a = torch::arange(4) * 2;
  const auto labels = name.rfind("triplet_plain", 0) == 0 ? torch::stack({a, a, a + 1}, 1).reshape(-1)
                                                          : torch::cat({a, a, a + 1});
  return {embeddings, labels};
}

// The loss `yaml` of the batch <prefix>_{embeddings,labels}.pt in `dir`: its value and its
// gradient must equal the reference's <prefix>_{loss,grad}.pt to 1e-5. Returns its output.
oml::losses::LossOutput check_against_reference(const std::filesystem::path& dir, const std::string& prefix,
                                                const std::string& yaml) {
  const auto embeddings = oml::io::load_tensor(dir / (prefix + "_embeddings.pt")).requires_grad_(true);
  const auto labels = oml::io::load_tensor(dir / (prefix + "_labels.pt"));
  auto out = criterion(yaml)->forward(embeddings, labels);
  out.loss.backward();
  CHECK(out.loss.item<double>() ==
        Approx(oml::io::load_tensor(dir / (prefix + "_loss.pt")).item<double>()).margin(1e-5));
  CHECK(max_abs_diff(embeddings.grad(), oml::io::load_tensor(dir / (prefix + "_grad.pt"))) <= 1e-5);
  return out;
}

}  // namespace

TEST_CASE(
    "OML's triplet and triplet_plain: value and gradient equal to OML's TripletLoss and TripletLossPlain",
    "[losses][oml_losses]") {
  const auto& dir = references();
  for (const auto& [name, yaml] : kTripletCases) {
    for (const int seed : {0, 1, 2}) {
      const std::string prefix = name + "_" + std::to_string(seed);
      INFO(prefix << ": " << yaml);
      const auto out = check_against_reference(dir, prefix, yaml);
      // OML's logs (need_logs): triplet 0 of every batch is active, its d(a,p) is 0.
      CHECK(out.logs.at("active_tri").item<double>() > 0);
      CHECK(out.logs.at("pos_dist").item<double>() > 0);
      CHECK(out.logs.at("neg_dist").item<double>() > 0);
    }
  }
}

TEST_CASE("surrogate_precision: value and gradient equal to OML 4.0's SurrogatePrecision",
          "[losses][oml_losses]") {
  // oml_losses_reference.py's export_surrogate runs the installed OML package; chunk_size (oml-cpp's
  // own) below the batch size checks the chunked ranks and their custom backward too.
  const auto& dir = oml::test::reference_export("oml_losses_reference.py", "export_surrogate");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"defaults", "{name: surrogate_precision, args: {k: 5}}"},
      {"sharp",
       "{name: surrogate_precision, args: {k: 3, temperature1: 0.5, temperature2: 0.05, chunk_size: 5}}"},
      {"sum",
       "{name: surrogate_precision, args: {k: 2, temperature1: 2.0, temperature2: 0.1, reduction: sum, "
       "chunk_size: 1}}"},
      {"uneven", "{name: surrogate_precision, args: {k: 4, temperature1: 1.0, temperature2: 0.2}}"},
  };
  for (const auto& [name, yaml] : cases) {
    for (const int seed : {0, 1, 2}) {
      const std::string prefix = name + "_" + std::to_string(seed);
      INFO(prefix << ": " << yaml);
      check_against_reference(dir, prefix, yaml);
    }
  }
}

TEST_CASE("OML's arcface and mlp_arcface: value and gradients equal to OML's, its weights loaded by name",
          "[losses][oml_losses]") {
  const auto& dir = references();
  for (const auto& [name, yaml] : kWeightedCases) {
    for (const int seed : {0, 1, 2}) {
      const std::string prefix = name + "_" + std::to_string(seed);
      INFO(prefix << ": " << yaml);
      const auto embeddings = oml::io::load_tensor(dir / (prefix + "_embeddings.pt")).requires_grad_(true);
      const auto labels = oml::io::load_tensor(dir / (prefix + "_labels.pt"));
      oml::losses::CriterionContext context = kRun;
      if (name.find("categories") != std::string::npos) {
        const auto categories = oml::io::load_tensor(dir / (prefix + "_categories.pt")).to(torch::kLong);
        context.label_categories.assign(categories.data_ptr<int64_t>(),
                                        categories.data_ptr<int64_t>() + categories.numel());
      }
      const auto loss = criterion(yaml, context);
      // OML's criterion state dict loads strictly: same names, same shapes.
      oml::io::load_state_dict(*loss, read_state(dir / (prefix + "_state.pt")), prefix + "_state.pt");
      const auto out = loss->forward(embeddings, labels);
      out.loss.backward();
      CHECK(out.loss.item<double>() ==
            Approx(oml::io::load_tensor(dir / (prefix + "_loss.pt")).item<double>()).margin(1e-5));
      CHECK(max_abs_diff(embeddings.grad(), oml::io::load_tensor(dir / (prefix + "_grad.pt"))) <= 1e-5);
      const auto grads = read_state(dir / (prefix + "_state_grad.pt"));
      const auto parameters = loss->named_parameters();
      CHECK(parameters.size() == grads.size());
      for (const auto& [key, grad] : grads) {
        INFO(key);
        REQUIRE(parameters.contains(key));
        // 1e-5 of the gradient's scale: with s = 30 and `reduction: sum` the weights' gradients
        // grow past 1, and Debian's LibTorch 1.13 (OpenBLAS) rounds its GEMMs differently from
        // torch 2.11's MKL (measured there: up to 1.8e-5 absolute).
        const double scale = std::max(1.0, grad.abs().max().item<double>());
        CHECK(max_abs_diff(parameters[key].grad(), grad) <= 1e-5 * scale);
      }
      CHECK(out.logs.count("accuracy") == 1);
    }
  }
}

TEST_CASE("OML's triplet, triplet_plain, arcface and mlp_arcface compute in float32 under bf16 autocast",
          "[losses][oml_losses]") {
  std::vector<std::pair<std::string, std::string>> cases = kTripletCases;
  cases.insert(cases.end(), kWeightedCases.begin(), kWeightedCases.end());
  for (const auto& [name, yaml] : cases) {
    INFO(name);
    auto [embeddings, labels] = triplet_batch(name);
    if (name.find("arcface") != std::string::npos) labels = torch::arange(12) % 10;
    const auto loss = criterion(yaml);
    const auto rounded = embeddings.to(torch::kBFloat16);
    const double fp32 = loss->forward(rounded.to(torch::kFloat), labels).loss.item<double>();
    const oml::AutocastGuard autocast(oml::config::Precision::bf16, torch::kCPU);
    const auto out = loss->forward(rounded, labels);
    CHECK(out.loss.scalar_type() == torch::kFloat);
    CHECK(out.loss.item<double>() == Approx(fp32).margin(1e-6));
  }
}

TEST_CASE("OML's triplet and triplet_plain check their args and that the batch is made of triplets",
          "[losses][oml_losses]") {
  CHECK_THROWS_WITH(criterion("{name: triplet, args: {reduction: none}}"),
                    Contains("criterion.args.reduction: loss 'triplet': reduction must be 'mean' "
                             "or 'sum', got 'none'"));
  CHECK_THROWS_WITH(criterion("{name: triplet_plain, args: {margin: -1}}"),
                    Contains("criterion.args.margin: loss 'triplet_plain': margin must be >= 0"));
  CHECK_THROWS_WITH(criterion("{name: triplet, args: {miner: {name: hard_triplets}}}"),
                    Contains("unknown key 'miner'"));
  // The default margin is triplet_with_miner's 0.1 (OML requires one).
  {
    auto [embeddings, labels] = triplet_batch("triplet");
    const auto with_default = criterion("{name: triplet}")->forward(embeddings, labels).loss.item<double>();
    CHECK(with_default == Approx(criterion("{name: triplet, args: {margin: 0.1}}")
                                     ->forward(embeddings, labels)
                                     .loss.item<double>()));
  }
  // A P x K batch is not triplets: a data error naming the first bad triplet.
  const auto pk = torch::arange(3).repeat_interleave(4);
  CHECK_THROWS_AS(criterion("{name: triplet}")->forward(torch::randn({12, 16}), pk), oml::DataError);
  CHECK_THROWS_WITH(
      criterion("{name: triplet}")->forward(torch::randn({12, 16}), pk),
      Contains("triplet: the batch is not made of triplets: triplet 0 (rows 0, 4, 8 of [anchors; "
               "positives; negatives]) has labels 0, 1, 2"));
  CHECK_THROWS_WITH(
      criterion("{name: triplet_plain}")->forward(torch::randn({12, 16}), pk),
      Contains("triplet_plain: the batch is not made of triplets: triplet 0 (rows 0..2) has labels "
               "0, 0, 0"));
  CHECK_THROWS_WITH(
      criterion("{name: triplet_plain}")->forward(torch::randn({4, 16}), torch::arange(4)),
      Contains("triplet_plain: expected a batch of triplets (a size divisible by 3), got 4 items"));
}

TEST_CASE("OML's mlp_arcface checks its args and builds torchvision's MLP under OML's names",
          "[losses][oml_losses]") {
  CHECK_THROWS_WITH(criterion("{name: mlp_arcface}"), Contains("mlp_features"));
  CHECK_THROWS_WITH(
      criterion("{name: mlp_arcface, args: {mlp_features: []}}"),
      Contains("criterion.args.mlp_features: loss 'mlp_arcface': mlp_features must list at least one"));
  CHECK_THROWS_WITH(criterion("{name: mlp_arcface, args: {mlp_features: [8, 0]}}"),
                    Contains("mlp_features must be > 0, got 0"));
  CHECK_THROWS_WITH(
      criterion("{name: mlp_arcface, args: {mlp_features: [8], smoothing_epsilon: 1}}"),
      Contains("criterion.args.smoothing_epsilon: loss 'mlp_arcface': smoothing_epsilon must be in"));
  CHECK_THROWS_WITH(criterion("{name: mlp_arcface, args: {mlp_features: [8], m: .inf}}"),
                    Contains("criterion.args.m: loss 'mlp_arcface': m (the angular margin"));
  CHECK_THROWS_WITH(criterion("{name: mlp_arcface, args: {mlp_features: [8], s: .nan}}"),
                    Contains("criterion.args.s: loss 'mlp_arcface'"));
  CHECK_THROWS_WITH(criterion("{name: mlp_arcface, args: {mlp_features: [8]}}", {16, 1, {}}),
                    Contains("loss 'mlp_arcface': the training set has 1 label(s)"));
  // OML's config (oml/configs/criterion/mlp_arcface.yaml) as written: 384 -> 512 -> 256 -> 3985 classes.
  const auto loss = criterion(
      "{name: mlp_arcface, args: {smoothing_epsilon: 0, m: 0.4, s: 64, in_features: 384, num_classes: 3985, "
      "mlp_features: [512, 256]}}",
      {16, 10, {}});
  std::vector<std::pair<std::string, std::vector<int64_t>>> names;
  for (const auto& item : loss->named_parameters())
    names.emplace_back(item.key(), item.value().sizes().vec());
  CHECK(names == std::vector<std::pair<std::string, std::vector<int64_t>>>{{"mlp.0.weight", {512, 384}},
                                                                           {"mlp.0.bias", {512}},
                                                                           {"mlp.3.weight", {256, 512}},
                                                                           {"mlp.3.bias", {256}},
                                                                           {"arcface.weight", {3985, 256}}});
  CHECK_THROWS_WITH(loss->forward(torch::randn({4, 16}), torch::arange(4)),
                    Contains("mlp_arcface: expected embeddings of size 384 (in_features), got 16"));
}

TEST_CASE("A dataframe's categories become arcface's label categories as OML numbers them",
          "[losses][oml_losses]") {
  oml::data::DataSplit split;
  split.labels = {0, 1, 2, 3, 1};
  split.label2category = {{0, "shoes"}, {1, "bags"}, {2, "shoes"}, {3, "caps"}};
  // Sorted: bags 0, caps 1, shoes 2.
  CHECK(split.label_category_indices() == std::vector<int64_t>{2, 0, 2, 1});
  split.label2category.clear();
  CHECK(split.label_category_indices().empty());
  // The categories only matter with smoothing: targets spread eps over the label's category.
  oml::losses::CriterionContext context{4, 4, {2, 0, 2, 1}};
  const auto smoothed = criterion("{name: arcface, args: {smoothing_epsilon: 0.2}}", context);
  const auto plain = criterion("{name: arcface, args: {smoothing_epsilon: 0.2}}", {4, 4, {}});
  {
    torch::NoGradGuard no_grad;
    smoothed->named_parameters()["weight"].copy_(torch::eye(4));
    plain->named_parameters()["weight"].copy_(torch::eye(4));
  }
  const auto x = torch::eye(4);
  const auto labels = torch::arange(4);
  CHECK(smoothed->forward(x, labels).loss.item<double>() !=
        Approx(plain->forward(x, labels).loss.item<double>()));
}

TEST_CASE("The weights of mlp_arcface and arcface train with loss_lr and resume from last.ckpt",
          "[losses][oml_losses][resume]") {
  oml::cli::register_builtins();
  // A linear extractor and the loss, trained as oml-train does: 5 steps, last.ckpt written as the
  // Trainer writes it, a fresh process (other initial weights) restored by restore_checkpoint,
  // 4 more steps; the losses must be those of 9 uninterrupted steps.
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
  for (const std::string criterion_yaml :
       {"{name: mlp_arcface, args: {mlp_features: [32, 12], m: 0.4, s: 16}}",
        "{name: arcface, args: {s: 16}}"}) {
    INFO(criterion_yaml);
    const std::string yaml = "dataset_root: d\ncriterion: " + criterion_yaml +
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
    const auto initial = oml::io::state_dict(*run.loss);
    std::map<std::string, torch::Tensor> initial_copy;
    for (const auto& [k, v] : initial) initial_copy[k] = v.detach().clone();
    REQUIRE(run.optimizer->param_groups().size() == 2);
    CHECK(run.optimizer->param_groups()[1].options().get_lr() == 0.05);
    steps(run, 0, 5);
    for (const auto& [k, v] : oml::io::state_dict(*run.loss))
      CHECK(max_abs_diff(v, initial_copy.at(k)) > 1e-3);

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
    // The criterion's entry holds the weights under OML's names.
    const auto saved = oml::io::load_checkpoint(path).resume->criterion;
    CHECK(saved.count(criterion_yaml.find("mlp") != std::string::npos ? "arcface.weight" : "weight") == 1);
    if (criterion_yaml.find("mlp") != std::string::npos) CHECK(saved.count("mlp.3.bias") == 1);
    const auto uninterrupted = steps(run, 5, 9);

    Run resumed = make(99);
    oml::pipelines::TrainingParts parts;
    parts.model = resumed.model.ptr().get();
    parts.criterion = resumed.loss.get();
    parts.optimizer = resumed.optimizer.get();
    oml::pipelines::restore_checkpoint(path, config, parts, nullptr);
    CHECK(steps(resumed, 5, 9) == uninterrupted);
  }
}

}  // namespace oml_losses_tests
