// Every config shipped under configs/ (the Fashion-MNIST default, the benchmark config and the
// dataset recipes) must load and build: a typo in a recipe would otherwise only show on a
// user's machine, after a dataset download. Components are built from their args on
// synthetic inputs; nothing here needs the datasets.
#include <torch/torch.h>

#include <filesystem>

#include "cli.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/data/sampler.h"
#include "oml/losses/criterion.h"
#include "oml/metrics/metric_table.h"
#include "oml/models/extractor.h"
#include "oml/models/pairwise_model.h"
#include "oml/optim/optimizer.h"
#include "oml/registry/registries.h"
#include "support/support.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> shipped_configs() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(oml::test::source_path("configs"))) {
    if (entry.path().extension() == ".yaml") out.push_back(entry.path());
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

}  // namespace

TEST_CASE("Every shipped config loads and its components build", "[config][registry][docs]") {
  oml::cli::register_builtins();
  const auto configs = shipped_configs();
  REQUIRE(configs.size() >= 13);  // fashion_mnist (6) + 4 recipes x (train, validate)
  for (const auto& path : configs) {
    INFO("config: " << path.string());
    auto cfg = oml::config::parse_run_config(oml::config::Document::from_file(path.string()).root());
    // The recipes point at ImageNet weights a user downloads first (docs/recipes.md); build
    // the architecture without them.
    if (cfg.extractor && cfg.extractor->args.defined() && cfg.extractor->args["weights"].defined()) {
      cfg = oml::config::parse_run_config(
          oml::config::Document::from_file(path.string(), {"extractor.args.weights=''"}).root());
    }
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
    if (cfg.postprocessor) r.postprocessors.require(*cfg.postprocessor);
    if (cfg.logger) r.loggers.require(*cfg.logger);
    if (!cfg.extractor) continue;
    const auto extractor = r.extractors.create(*cfg.extractor);
    REQUIRE(extractor);
    if (cfg.criterion) {
      const auto criterion = r.losses.create(*cfg.criterion, {extractor->feat_dim(), 100});
      REQUIRE(criterion);
      if (cfg.optimizer) {
        oml::optim::OptimizerContext context;
        context.model_parameters = extractor->parameters();
        context.loss_parameters = criterion->parameters();
        CHECK(r.optimizers.create(*cfg.optimizer, context));
      }
    }
    if (cfg.scheduling.scheduler) r.schedulers.require(*cfg.scheduling.scheduler);
  }
}
