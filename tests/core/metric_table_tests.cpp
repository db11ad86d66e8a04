// Metrics as registered components: the table configure_metrics builds from `metric_args:`,
// its keys, its checks, and what it demands of a metric.
#include <torch/torch.h>

#include "oml/config/document.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/metric_table.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/embedding_sets.h"
#include "support/support.h"

namespace metric_table_tests {

using namespace oml;
using Catch::Matchers::Contains;

using oml::test::every_item_both;

namespace {

const char* kPluginOrigin = "plugin 'table_fixture' (/tmp/libtable_fixture.so)";

// `metric_args: <yaml>` of a config named metrics.yaml.
config::Node metric_args(const std::string& yaml) {
  const auto document = config::Document::from_string("metric_args: " + yaml + "\n", "metrics.yaml");
  return document.root()["metric_args"];
}

metrics::MetricTable table(const std::string& yaml) {
  oml::cli::register_builtins();
  return metrics::configure_metrics(metric_args(yaml));
}

// A metric that reports what its `table_fixture: {declare, report}` arg says; it stays out of
// every table whose metric_args do not name it.
class ScriptedMetric final : public metrics::Metric {
 public:
  ScriptedMetric(std::string declared, std::string reported)
      : declared_(std::move(declared)), reported_(std::move(reported)) {}
  std::vector<std::string> names() const override { return {declared_}; }
  metrics::MetricValues compute(const metrics::MetricInputs&) const override {
    metrics::MetricValues values;
    if (reported_ == "throw") throw std::out_of_range("vector::at");
    values.values[metrics::kOverall + "/" + reported_] = 0.5;
    return values;
  }

 private:
  std::string declared_, reported_;
};

void register_scripted_metric() {
  if (registries().metrics.contains("table_fixture")) return;
  registries().metrics.add(
      "table_fixture",
      [](config::ArgsReader& args) {
        std::map<std::string, std::string> script;
        args.optional("table_fixture", script);
        return script;
      },
      [](std::map<std::string, std::string> script, const NoContext&) -> std::shared_ptr<metrics::Metric> {
        if (script.empty()) return nullptr;
        return std::make_shared<ScriptedMetric>(script["declare"], script["report"]);
      },
      "reports what its args say (tests only)", kPluginOrigin);
}

}  // namespace

TEST_CASE("Without metric_args the table computes the default cmc, precision and map", "[metrics]") {
  oml::cli::register_builtins();
  const auto defaults = metrics::configure_metrics(config::Node());
  CHECK(defaults.overall_keys() ==
        std::vector<std::string>{"OVERALL/cmc/1", "OVERALL/cmc/5", "OVERALL/map/5", "OVERALL/precision/5"});
  CHECK(defaults.required_top_k() == 5);
  CHECK_FALSE(defaults.needs_pair_pass());
  CHECK(table("{}").overall_keys() == defaults.overall_keys());
  // An empty list switches a metric off; fnmr and pcf are off unless asked for.
  CHECK(table("{cmc_top_k: [], precision_top_k: [], map_top_k: [2], fmr_vals: [0.01], pcf_variance: [0.5]}")
            .overall_keys() ==
        std::vector<std::string>{"OVERALL/fnmr@fmr/0.01", "OVERALL/map/2", "OVERALL/pcf/0.5"});
  CHECK(table("{cmc_top_k: [1, 1, 3]}").overall_keys().front() == "OVERALL/cmc/1");
  CHECK(table("{cmc_top_k: [1, 1, 3]}").required_top_k() == 5);  // map and precision at 5
}

TEST_CASE("Every registered metric's keys are exactly the OVERALL keys validation reports", "[metrics]") {
  const auto all = table(
      "{cmc_top_k: [1, 3], precision_top_k: [2], map_top_k: [3], fmr_vals: [0.1, 0.5], pcf_variance: [0.5, "
      "1], mean_average_precision_at_r: true, r_precision: true, mrr: true, precision_at_1: true}");
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(5);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 40; ++i) labels.push_back(i % 4);
  metrics::EmbeddingSet set = every_item_both(torch::randn({40, 4}, generator), labels);
  set.categories.assign(40, "a");
  for (int64_t i = 20; i < 40; ++i) set.categories[i] = "b";
  metrics::EmbeddingMetricsOptions options;
  options.metrics = all;
  const auto result = metrics::compute_embedding_metrics(set, options);
  std::vector<std::string> reported;
  for (const auto& kv : result.metrics) {
    if (starts_with(kv.first, "OVERALL/")) reported.push_back(kv.first);
  }
  auto expected = all.overall_keys();
  std::sort(expected.begin(), expected.end());
  CHECK(reported == expected);
  CHECK(result.metrics.count("a/cmc/3") == 1);
  CHECK(result.metrics.count("b/pcf/0.5") == 1);
  CHECK(result.metrics.count("a/fnmr@fmr/0.1") == 0);  // fnmr is reported under OVERALL only
  CHECK(result.metrics.count("b/mean_average_precision_at_r") == 1);
  // The per-query metrics' values are kept for worst-query reports.
  CHECK(result.per_query.size() == 4);
  CHECK(result.per_query.at("map/3").size() == 40);
}

TEST_CASE("Bad metric args are config errors that point at the key", "[metrics]") {
  oml::cli::register_builtins();
  SECTION("a zero top k") {
    CHECK_THROWS_AS(table("{map_top_k: [5, 0]}"), ConfigError);
    CHECK_THROWS_WITH(table("{map_top_k: [5, 0]}"), Contains("metrics.yaml:1:26: metric_args.map_top_k") &&
                                                        Contains("metric 'map'") && Contains("got 0"));
  }
  SECTION("an fmr outside [0, 1]") {
    CHECK_THROWS_WITH(table("{fmr_vals: [2.0]}"),
                      Contains("metric_args.fmr_vals") && Contains("expected fractions in [0, 1], got 2"));
  }
  SECTION("a pcf variance outside [0, 1]") {
    CHECK_THROWS_WITH(table("{pcf_variance: [-0.5]}"), Contains("metric_args.pcf_variance"));
  }
  SECTION("a value of the wrong type") {
    CHECK_THROWS_WITH(table("{cmc_top_k: [one]}"), Contains("metric_args.cmc_top_k[0]"));
  }
  SECTION("a key no metric reads is nobody's: not blamed on a plugin metric") {
    register_scripted_metric();
    try {
      table("{cmc_topk: [1]}");
      FAIL("no error");
    } catch (const ConfigError& e) {
      for (const auto& line : e.context()) CHECK_THAT(line, !Contains("comes from"));
    }
  }
  SECTION("a key no metric reads lists every metric's keys") {
    CHECK_THROWS_WITH(table("{cmc_topk: [1]}"),
                      Contains("metrics.yaml:1:15: metric_args.cmc_topk") &&
                          Contains("unknown key 'cmc_topk'") && Contains("did you mean 'cmc_top_k'") &&
                          Contains("fmr_vals") && Contains("return_only_overall_category"));
  }
}

TEST_CASE("A metric that reports other keys than it declares is a plugin error", "[metrics][plugins]") {
  oml::cli::register_builtins();
  register_scripted_metric();
  const auto set = every_item_both(torch::tensor({0.f, 1.f, 5.f, 6.f}).reshape({4, 1}), {0, 0, 1, 1});
  metrics::EmbeddingMetricsOptions options;

  options.metrics = table("{table_fixture: {declare: good/1, report: good/1}}");
  CHECK(options.metrics.overall_keys().back() == "OVERALL/good/1");
  CHECK(metrics::compute_embedding_metrics(set, options).metrics.at("OVERALL/good/1") == 0.5);

  options.metrics = table("{table_fixture: {declare: good/1, report: other/1}}");
  CHECK_THROWS_AS(metrics::compute_embedding_metrics(set, options), PluginError);
  CHECK_THROWS_WITH(metrics::compute_embedding_metrics(set, options),
                    Contains("metric 'table_fixture' from plugin 'table_fixture'") &&
                        Contains("'OVERALL/other/1', which is none of its declared keys"));

  options.metrics = table("{table_fixture: {declare: good/1, report: throw}}");
  CHECK_THROWS_AS(metrics::compute_embedding_metrics(set, options), PluginError);
  CHECK_THROWS_WITH(metrics::compute_embedding_metrics(set, options),
                    Contains("libtable_fixture.so") && Contains("failed while computing: vector::at"));

  // A key a built-in reports already: refused before anything is computed.
  CHECK_THROWS_AS(table("{table_fixture: {declare: cmc/1, report: cmc/1}}"), PluginError);
  CHECK_THROWS_WITH(
      table("{table_fixture: {declare: cmc/1, report: cmc/1}}"),
      Contains("metric 'table_fixture'") && Contains("reports 'OVERALL/cmc/1', as does metric 'cmc'"));
}

TEST_CASE("OML's metric_args names are accepted: pfc_variance, *_main_category and the plotting keys",
          "[metrics][config]") {
  const std::string oml_args =
      "{metrics_to_exclude_from_visualization: [cmc,], cmc_top_k: [1, 5], map_top_k: [5], "
      "pfc_variance: [0.5, 0.9], return_only_main_category: true, visualize_only_main_category: false}";
  const auto oml_table = table(oml_args);
  const auto keys = oml_table.overall_keys();
  CHECK(std::count(keys.begin(), keys.end(), "OVERALL/pcf/0.5") == 1);
  CHECK(oml_table.only_overall());
  const auto plots = metrics::visualization_options(metric_args(oml_args));
  CHECK(plots.excluded == std::vector<std::string>{"cmc"});
  CHECK_FALSE(plots.only_overall);
  CHECK(plots.excludes("cmc/5"));
  CHECK_FALSE(plots.excludes("map/5"));
  CHECK_THROWS_WITH(
      table("{pcf_variance: [0.5], pfc_variance: [0.9]}"),
      Contains("metrics.yaml:1:36") && Contains("'pfc_variance' is another name of 'pcf_variance'"));
  CHECK_THROWS_WITH(table("{visualize_only_overall_category: true, visualize_only_main_category: true}"),
                    Contains("keep one of them"));
}

}  // namespace metric_table_tests
