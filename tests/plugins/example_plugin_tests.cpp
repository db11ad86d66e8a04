// The example third-party plugin (plugins/examples), loaded the way docs/plugins.md says: the
// library is loaded, its sampler is built by name from a config, and the DDP plugin wraps it
// like any built-in. The library is built in-tree from plugins/examples/CMakeLists.txt
// (tests/CMakeLists.txt passes its path); tests/scripts/example_plugin.sh builds the same
// folder out of tree against the installed package.
#include <torch/torch.h>

#include "oml/config/document.h"
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/registry/plugin.h"
#include "oml/samplers/builtin_samplers.h"
#include "sampler_test_data.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace example_plugin_tests {

using Catch::Matchers::Contains;
using oml::config::Document;

namespace {

std::shared_ptr<oml::data::Sampler> build(const Document& document,
                                          const oml::data::SamplerContext& context) {
  return oml::samplers::build_sampler(oml::config::parse_component(document.root()["sampler"], "sampler"),
                                      context);
}

void load_example_plugin() {
  oml::cli::register_builtins();
  const auto& plugin = oml::load_plugin(OML_EXAMPLE_PLUGIN);
  REQUIRE(plugin.name == "frequency_sampler");
}

}  // namespace

TEST_CASE("The example plugin registers frequency_balance under its own origin", "[plugins][samplers]") {
  load_example_plugin();
  bool found = false;
  for (const auto& info : oml::registries().samplers.infos()) {
    if (info.name != "frequency_balance") continue;
    found = true;
    CHECK_THAT(info.origin, Contains("frequency_sampler") && Contains("libfrequency_sampler.so"));
  }
  CHECK(found);
}

TEST_CASE("The example plugin's sampler is built by name and yields P x K batches", "[plugins][samplers]") {
  load_example_plugin();
  const auto context = oml::test::make_context({12, 2, 6, 0}, 3);
  const auto document = Document::from_string(
      "sampler:\n  name: frequency_balance\n  args: {n_labels: 3, n_instances: 2, power: 1.0}\n", "cfg.yaml");
  const auto sampler = build(document, context);
  REQUIRE(sampler->kind() == oml::data::SamplerKind::batch);
  CHECK(sampler->name() == "frequency_balance");
  CHECK(sampler->size() == 4);  // L // P
  CHECK(sampler->batch_size() == 6);
  const auto batches = oml::data::epoch_batches(*sampler, 2);
  REQUIRE(batches.size() == 4);
  for (const auto& batch : batches) {
    const auto labels = oml::test::check_blocks(context, batch, 2);
    CHECK(std::set<int64_t>(labels.begin(), labels.end()).size() == 3);  // distinct labels
  }
  CHECK(batches == oml::data::epoch_batches(*sampler, 2));
  CHECK(batches != oml::data::epoch_batches(*sampler, 3));

  // Wrapped by the DDP plugin like any built-in: equal steps on both ranks.
  const oml::ddp::DDPSamplerWrapper rank0(sampler, {true, true}, 0, 2, context.seed);
  const oml::ddp::DDPSamplerWrapper rank1(sampler, {true, true}, 1, 2, context.seed);
  CHECK(rank0.size() == 2);
  CHECK(rank0.batches(2).size() == rank1.batches(2).size());
  CHECK(rank0.name() == "frequency_balance");
}

TEST_CASE("The example plugin's power argument shifts draws towards frequent labels", "[plugins][samplers]") {
  load_example_plugin();
  // Label 0 has 100 items, labels 1..9 two each.
  oml::data::SamplerContext context;
  context.labels.assign(100, 0);
  for (int64_t l = 1; l < 10; ++l) context.labels.insert(context.labels.end(), 2, l);
  const auto share_of_big_label = [&](const std::string& power) {
    const auto document = Document::from_string(
        "sampler: {name: frequency_balance, args: {n_labels: 2, n_instances: 2, power: " + power + "}}\n",
        "cfg.yaml");
    const auto sampler = build(document, context);
    int64_t with_big = 0, total = 0;
    for (int64_t e = 0; e < 100; ++e) {
      for (const auto& batch : oml::data::epoch_batches(*sampler, e)) {
        with_big += context.labels[batch[0]] == 0 || context.labels[batch[2]] == 0;
        ++total;
      }
    }
    return static_cast<double>(with_big) / static_cast<double>(total);
  };
  // power 0: uniform labels, P(label 0 among 2 of 10) = 0.2; power 1: weight 100 vs 18.
  CHECK(share_of_big_label("0") == Approx(0.2).margin(0.05));
  CHECK(share_of_big_label("1") > 0.9);
}

TEST_CASE("The example plugin's bad arguments point at the config", "[plugins][samplers]") {
  load_example_plugin();
  const auto context = oml::test::make_context({4, 2, 3, 0}, 9);
  const auto too_many = Document::from_string(
      "sampler:\n  name: frequency_balance\n  args: {n_labels: 5, n_instances: 2}\n", "cfg.yaml");
  // More labels per batch than the data has: found by the build, a data error at the argument.
  CHECK_THROWS_AS(build(too_many, context), oml::DataError);
  CHECK_THROWS_WITH(build(too_many, context), Contains("cfg.yaml:3:20: sampler.args.n_labels") &&
                                                  Contains("1 < n_labels <= 4") && Contains("got 5"));
  // The error keeps its type (exit code 2) and names the plugin in a context line.
  try {
    build(too_many, context);
  } catch (const oml::DataError& e) {
    REQUIRE(e.context().size() == 1);
    CHECK_THAT(e.context()[0],
               Contains("sampler 'frequency_balance' comes from plugin 'frequency_sampler'") &&
                   Contains("libfrequency_sampler.so"));
  }
  const auto unknown = Document::from_string(
      "sampler: {name: frequency_balance, args: {n_labels: 2, n_instances: 2, powr: 2}}\n", "cfg.yaml");
  CHECK_THROWS_WITH(build(unknown, context), Contains("did you mean 'power'"));
  // What the args alone show is found by the parse: a config error, the plugin named.
  const auto one = Document::from_string(
      "sampler:\n  name: frequency_balance\n  args: {n_labels: 1, n_instances: 2}\n", "cfg.yaml");
  CHECK_THROWS_AS(build(one, context), oml::ConfigError);
  CHECK_THROWS_WITH(build(one, context), Contains("cfg.yaml:3:20: sampler.args.n_labels") &&
                                             Contains("n_labels must be > 1, got 1"));
}

TEST_CASE("The example metric plugin computes recall@k from the shared retrieval", "[plugins][metrics]") {
  oml::cli::register_builtins();
  REQUIRE(oml::load_plugin(OML_RECALL_PLUGIN).name == "recall_metric");
  // Five items on a line, labels [0, 1, 0, 0, 0], every item a query and a gallery item.
  oml::metrics::EmbeddingSet set;
  set.embeddings = torch::tensor({0.f, 1.f, 2.f, 10.f, 20.f}).reshape({5, 1});
  set.labels = {0, 1, 0, 0, 0};
  set.is_query = {1, 1, 1, 1, 1};
  set.is_gallery = {1, 1, 1, 1, 1};
  oml::metrics::EmbeddingMetricsOptions options;
  const auto document =
      Document::from_string("metric_args: {cmc_top_k: [1], recall_top_k: [2]}\n", "cfg.yaml");
  options.metrics = oml::metrics::configure_metrics(document.root()["metric_args"]);
  CHECK(options.metrics.overall_keys() == std::vector<std::string>{"OVERALL/cmc/1", "OVERALL/map/5",
                                                                   "OVERALL/precision/5",
                                                                   "OVERALL/recall/2"});
  const auto result = oml::metrics::compute_embedding_metrics(set, options);
  // n_gt is 3 for the label-0 items: query 0 retrieves [1 miss, 2 hit] -> 1/3; query 2 [1 miss,
  // 0 hit] -> 1/3; query 3 [2 hit, 1 miss] -> 1/3; query 4 [3 hit, 2 hit] -> 2/3; query 1 has no
  // ground truth: 0.
  const std::vector<double> expected{1.0 / 3, 0, 1.0 / 3, 1.0 / 3, 2.0 / 3};
  const auto& per_query = result.per_query.at("recall/2");
  REQUIRE(per_query.size() == 5);
  for (std::size_t q = 0; q < 5; ++q) CHECK(per_query[q] == Approx(expected[q]).margin(1e-12));
  CHECK(result.metrics.at("OVERALL/recall/2") == Approx(5.0 / 3 / 5).margin(1e-12));

  const auto bad = Document::from_string("metric_args: {recall_top_k: [0]}\n", "cfg.yaml");
  CHECK_THROWS_WITH(oml::metrics::configure_metrics(bad.root()["metric_args"]),
                    Contains("cfg.yaml:1:29: metric_args.recall_top_k: metric 'recall'"));
}

}  // namespace example_plugin_tests
