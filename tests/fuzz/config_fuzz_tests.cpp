// Fuzzing the config reader: mutated YAML files and --set flags go through what oml-train does
// with a config before it reads any data (cli::Invocation::load_config: the document with its
// overrides and ${...} references, the config's plugins, the typed RunConfig and the component
// names), then builds the components whose args are plain settings, on synthetic inputs:
// metrics, transforms, the sampler, the loss, the optimizer and the scheduler.
//
// Models (extractor, pairwise model) are not built: their args are layer sizes, and an absurd
// size is an allocation of that size, which the contract calls out of memory (exit 1), not a
// parser's failure.
#include <torch/torch.h>

#include "fuzz/config_input.h"
#include "fuzz/fuzz.h"
#include "oml/config/document.h"
#include "oml/data/sampler.h"
#include "oml/data/transform.h"
#include "oml/losses/criterion.h"
#include "oml/metrics/metric_table.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/samplers/builtin_samplers.h"
#include "runtime/pipeline_setup.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace config_fuzz_tests {

using namespace oml;

namespace {

// 64 labels x 8 rows in 8 categories: enough for the seeds' samplers.
data::SamplerContext synthetic_train_split(const config::RunConfig& config) {
  data::SamplerContext context;
  for (int64_t label = 0; label < 64; ++label) {
    context.label_values.push_back(label);
    for (int item = 0; item < 8; ++item) {
      context.labels.push_back(label);
      context.categories.push_back("category_" + std::to_string(label % 8));
    }
  }
  context.seed = config.seed;
  context.default_batch_size = config.bs_train;
  context.source = "the fuzz test's synthetic train split";
  return context;
}

void load_config_as_oml_train(const std::string& input) {
  const fuzz::ConfigInput given = fuzz::decode_config(input);
  const config::Document document = config::Document::from_string(given.yaml, "fuzz.yaml", given.overrides);
  document.dump();  // what the run directory's config.yaml gets
  cli::Invocation invocation;
  invocation.command = "oml-train";
  const config::RunConfig config = invocation.load_config(document);

  // Built as the pipelines build them: from the parse load_config kept.
  auto& r = registries();
  const ParsedComponents& parsed = pipelines::parsed_components(config);
  const metrics::MetricTable& metrics = pipelines::configured_metrics(config);
  for (const auto* slot : {&parsed.transforms_train, &parsed.transforms_val, &parsed.transforms_extraction,
                           &parsed.transforms_predict}) {
    if (*slot) r.transforms.build(**slot);
  }
  const auto sampler = samplers::build_sampler(parsed.sampler, synthetic_train_split(config));
  const int64_t steps_per_epoch = data::batches_per_epoch(*sampler);

  torch::nn::Linear model(16, 4);
  std::shared_ptr<losses::Criterion> criterion;
  optim::OptimizerContext optimizer_context;
  optimizer_context.model_parameters = model->parameters();
  if (parsed.criterion) {
    criterion = r.losses.build(*parsed.criterion, {16, 64});
    optimizer_context.loss_parameters = criterion->parameters();
  }
  if (!parsed.optimizer) return;
  const auto optimizer = r.optimizers.build(*parsed.optimizer, optimizer_context);
  const auto scheduler = pipelines::build_scheduler(config, *optimizer, steps_per_epoch);
  pipelines::check_checkpoint_metric(config, metrics.overall_keys());
  if (scheduler && scheduler->requires_metric())
    pipelines::check_monitor_metric(config, metrics.overall_keys(),
                                    criterion ? losses::training_loss_name(*criterion) : "loss");
}

}  // namespace

TEST_CASE("Mutated YAML configs and --set flags end in exit 0 or 2", "[fuzz][config]") {
  cli::register_builtins();
  fuzz::Target target;
  target.name = "config";
  target.extension = ".fuzz";
  target.seeds = fuzz::config_seeds();
  target.dictionary = fuzz::yaml_dictionary();
  const std::vector<std::string> keys = fuzz::config_key_paths(target.seeds);
  target.mutate = [keys](fuzz::Mutator& m, const std::string& input, const std::vector<std::string>& corpus) {
    return fuzz::mutate_config(m, input, corpus, keys);
  };
  target.describe = fuzz::describe_config;
  target.entry_points = {{"oml-train's config stages", load_config_as_oml_train}};
  fuzz::check(target, 3.0);
}

}  // namespace config_fuzz_tests
