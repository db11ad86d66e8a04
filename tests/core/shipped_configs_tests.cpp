// Every config shipped under configs/ (the Fashion-MNIST default, the benchmark config and the
// dataset recipes) must load and build: a typo in a recipe would otherwise only show on a
// user's machine, after a dataset download. Components are built from their args on
// synthetic inputs; nothing here needs the datasets.
#include <torch/torch.h>

#include <filesystem>
#include <map>

#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/data/sampler.h"
#include "oml/losses/criterion.h"
#include "oml/metrics/metric_table.h"
#include "oml/models/extractor.h"
#include "oml/models/pairwise_model.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/report/run_logger.h"
#include "oml/retrieval/postprocessor.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"
#include "support/text_fixtures.h"

namespace shipped_configs_tests {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using oml::test::TempDir;
using oml::test::write_file;

namespace {

// The config groups that `defaults:` lists choose from, with the run-config key each option is
// placed at in the test (OML's own configs place transforms and schedulers with `@`).
const std::map<std::string, std::string> kGroupKeys = {
    {"criterion", "criterion"},         {"extractor", "extractor"}, {"logger", "logger"},
    {"miner", "criterion.args.miner"},  {"optimizer", "optimizer"}, {"pairwise_model", "pairwise_model"},
    {"postprocessor", "postprocessor"}, {"sampler", "sampler"},     {"scheduler", "scheduling.scheduler"},
    {"transforms", "transforms_train"}};

/// The run configs shipped under configs/ (the recipes), not the config groups' options.
std::vector<fs::path> shipped_configs() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(oml::test::source_path("configs"))) {
    const std::string folder = entry.path().parent_path().filename().string();
    if (entry.path().extension() == ".yaml" && !kGroupKeys.count(folder)) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// 12 categories x 40 labels x 12 items: enough for every shipped sampler's C x P x K.
oml::data::SamplerContext synthetic_labels() {
  oml::data::SamplerContext context;
  for (int64_t label = 0; label < 480; ++label) {
    for (int item = 0; item < 12; ++item) {
      context.labels.push_back(label);
      context.categories.push_back("category_" + std::to_string(label % 12));
    }
  }
  return context;
}

/// Builds every component `cfg` names from its args, on synthetic inputs.
void build_components(const oml::config::RunConfig& cfg) {
  auto& r = oml::registries();
  // Their metric args configure, and the checkpoint metric is one of the keys they produce.
  const auto overall_keys = oml::metrics::configure_metrics(cfg.metric_args).overall_keys();
  if (oml::starts_with(cfg.metric_for_checkpointing, "OVERALL/")) {
    CHECK(std::count(overall_keys.begin(), overall_keys.end(), cfg.metric_for_checkpointing) == 1);
  }
  if (cfg.transforms_train) CHECK(r.transforms.create(*cfg.transforms_train));
  if (cfg.transforms_val) CHECK(r.transforms.create(*cfg.transforms_val));
  if (cfg.sampler) CHECK(r.samplers.create(*cfg.sampler, synthetic_labels()));
  if (cfg.pairwise_model) {
    const auto model = r.pairwise_models.create(*cfg.pairwise_model);
    REQUIRE(model);
    oml::optim::OptimizerContext context;
    context.model_parameters = model->parameters();
    if (cfg.optimizer) CHECK(r.optimizers.create(*cfg.optimizer, context));
  }
  if (cfg.postprocessor) {
    if (cfg.postprocessor->name == "pairwise_reranker") {
      // Its model comes from the pipeline: without one, the error after its args are read.
      CHECK_THROWS_WITH(r.postprocessors.create(*cfg.postprocessor, {}), Contains("needs a pairwise model"));
    } else {
      CHECK(r.postprocessors.create(*cfg.postprocessor, {}));
    }
  }
  if (cfg.logger) r.loggers.require(*cfg.logger);
  if (!cfg.extractor) return;
  const auto extractor = r.extractors.create(*cfg.extractor);
  REQUIRE(extractor);
  if (cfg.criterion) {
    const auto criterion = r.losses.create(*cfg.criterion, {extractor->feat_dim(), 100});
    REQUIRE(criterion);
    if (cfg.optimizer) {
      oml::optim::OptimizerContext context;
      context.model_parameters = extractor->parameters();
      context.loss_parameters = criterion->parameters();
      const auto optimizer = r.optimizers.create(*cfg.optimizer, context);
      REQUIRE(optimizer);
      if (cfg.scheduling.scheduler)
        CHECK(r.schedulers.create(*cfg.scheduling.scheduler, {optimizer.get(), 100000}));
      return;
    }
  }
  if (cfg.scheduling.scheduler) r.schedulers.require(*cfg.scheduling.scheduler);
}

}  // namespace

TEST_CASE("Every shipped config loads and its components build", "[config][registry][docs]") {
  oml::cli::register_builtins();
  const auto configs = shipped_configs();
  REQUIRE(configs.size() >= 13);  // fashion_mnist (6) + 4 recipes x (train, validate)
  // The text configs name a Hugging Face folder a user (or bench/text_retrieval.sh) puts in
  // place first: a tiny BERT folder stands in for it.
  TempDir dir;
  oml::test::write_tiny_text_model(dir / "model");
  for (const auto& path : configs) {
    INFO("config: " << path.string());
    auto cfg = oml::config::parse_run_config(oml::config::Document::from_file(path.string()).root());
    // The recipes point at ImageNet weights a user downloads first (docs/recipes.md); build
    // the architecture without them.
    if (cfg.extractor && cfg.extractor->args.defined() && cfg.extractor->args["weights"].defined()) {
      cfg = oml::config::parse_run_config(
          oml::config::Document::from_file(path.string(), {"extractor.args.weights=''"}).root());
    }
    if (cfg.extractor && cfg.extractor->name == "hf_text_encoder") {
      cfg = oml::config::parse_run_config(
          oml::config::Document::from_file(path.string(),
                                           {"extractor.args.model_dir=" + (dir / "model").string()})
              .root());
    }
    build_components(cfg);
  }
}

TEST_CASE("Every shipped config group option composes and its component builds", "[config][registry]") {
  // What `defaults: [- optimizer: adam]` pulls in (docs/configuration.md#config-groups-defaults): each
  // option of each group, placed where a run config reads it, next to what the others need.
  oml::cli::register_builtins();
  TempDir dir;
  std::size_t options = 0;
  for (const auto& [group, key] : kGroupKeys) {
    const fs::path folder = fs::path(oml::test::source_path("configs")) / group;
    REQUIRE(fs::is_directory(folder));
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string option = entry.path().stem().string();
      if (entry.path().extension() != ".yaml") continue;
      INFO("configs/" << group << "/" << option << ".yaml");
      // What the other parts of a run need, unless the group provides it.
      std::string text = "defaults:\n  - " + group + "@" + key + ": " + option + "\n";
      const std::map<std::string, std::string> others = {
          {"extractor", "extractor: {name: conv_net, args: {feat_dim: 8}}\n"},
          {"criterion", "criterion: {name: triplet_with_miner, args: {margin: 0.1}}\n"},
          {"optimizer", "optimizer: {name: adam}\n"},
          {"pairwise_model", "pairwise_model: {name: linear_siamese, args: {feat_dim: 8}}\n"}};
      for (const auto& [other_key, other] : others) {
        if (key != other_key) text += other;
      }
      write_file(dir / "config.yaml", text);
      const auto document = oml::config::Document::from_file((dir / "config.yaml").string());
      const auto placed = oml::config::find_path(document.root().yaml(), key);
      REQUIRE(placed.IsDefined());
      CHECK(placed["name"].as<std::string>() == option);
      // A logger is built with a run directory and ends its run there (wandb, neptune and
      // clearml write their offline runs into it).
      if (group == "logger") {
        const auto spec = *oml::config::parse_run_config(document.root()).logger;
        oml::report::LoggerContext context;
        context.run_dir = dir / ("run_" + option);
        fs::create_directories(context.run_dir);
        auto logger = oml::registries().loggers.create(spec, context);
        REQUIRE(logger);
        logger->finish(oml::report::RunStatus::finished);
        ++options;
        continue;
      }
      build_components(oml::config::parse_run_config(document.root()));
      ++options;
    }
  }
  CHECK(options >= 32);  // every shipped option
}

}  // namespace shipped_configs_tests
