#include "oml/metrics/metric_table.h"

#include <algorithm>
#include <limits>

#include "oml/common/strings.h"
#include "oml/config/args_reader.h"
#include "oml/registry/registries.h"

namespace oml::metrics {

namespace {

ComponentInfo info_of(const MetricTable::Entry& entry) { return ComponentInfo{entry.name, "", entry.origin}; }

// A metric broke its contract (metric.h): the plugin's fault, or a bug in a built-in.
[[noreturn]] void broken_contract(const MetricTable::Entry& entry, const std::string& message) {
  const std::string text = "metric '" + entry.name + "' from " + entry.origin + " " + message;
  if (info_of(entry).builtin()) throw InternalError(text);
  throw PluginError(text);
}

bool declared(const MetricTable::Entry& entry, const std::string& stem) {
  return std::find(entry.names.begin(), entry.names.end(), stem) != entry.names.end();
}

// A full key "<group>/<stem>" with a declared stem.
bool declared_key(const MetricTable::Entry& entry, const std::string& key) {
  return std::any_of(entry.names.begin(), entry.names.end(), [&](const std::string& stem) {
    return key.size() > stem.size() + 1 && ends_with(key, "/" + stem);
  });
}

void check_values(const MetricTable::Entry& entry, const MetricValues& values, std::size_t num_queries) {
  for (const auto& [stem, per_query] : values.per_query) {
    if (!declared(entry, stem))
      broken_contract(entry, "reported per-query values for '" + stem + "', which it does not declare");
    if (per_query.size() != num_queries) {
      broken_contract(entry, "reported " + std::to_string(per_query.size()) + " per-query values for '" +
                                 stem + "' for " + std::to_string(num_queries) + " queries");
    }
  }
  for (const auto& kv : values.values) {
    if (!declared_key(entry, kv.first))
      broken_contract(entry, "reported '" + kv.first + "', which is none of its declared keys");
  }
  for (const auto& stem : entry.names) {
    if (!values.per_query.count(stem) && !values.values.count(kOverall + "/" + stem))
      broken_contract(entry, "did not report '" + kOverall + "/" + stem + "', which it declares");
  }
}

double mean_of(const std::vector<double>& values, const std::vector<int64_t>& which) {
  double sum = 0.0;
  for (const int64_t i : which) sum += values[i];
  return which.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(which.size());
}

}  // namespace

MetricTable::MetricTable(std::vector<Entry> entries, bool only_overall)
    : entries_(std::move(entries)), only_overall_(only_overall) {}

std::vector<std::string> MetricTable::overall_keys() const {
  std::vector<std::string> keys;
  for (const auto& entry : entries_) {
    for (const auto& stem : entry.names) keys.push_back(kOverall + "/" + stem);
  }
  return keys;
}

int64_t MetricTable::required_top_k() const {
  int64_t top_k = 1;
  for (const auto& entry : entries_) top_k = std::max(top_k, entry.metric->required_top_k());
  return top_k;
}

bool MetricTable::reads_to_max_ground_truth() const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [](const Entry& entry) { return entry.metric->reads_to_max_ground_truth(); });
}

bool MetricTable::needs_pair_pass() const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [](const Entry& entry) { return entry.metric->needs_pair_pass(); });
}

std::vector<std::unique_ptr<PairPass>> MetricTable::start_pair_passes(const PairPassInputs& inputs) const {
  std::vector<std::unique_ptr<PairPass>> passes(entries_.size());
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i].metric->needs_pair_pass()) continue;
    passes[i] = entries_[i].metric->start_pair_pass(inputs);
    if (!passes[i]) broken_contract(entries_[i], "needs a pair pass but started none");
  }
  return passes;
}

void MetricTable::compute(const MetricInputs& inputs, const std::vector<std::unique_ptr<PairPass>>& passes,
                          std::map<std::string, double>& metrics,
                          std::map<std::string, std::vector<double>>& per_query) const {
  const std::map<std::string, std::vector<int64_t>> groups = queries_by_group(inputs);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& entry = entries_[i];
    const MetricInputs own{inputs.set,          inputs.retrieval,
                           inputs.hits,         inputs.query_rows,
                           inputs.per_category, i < passes.size() ? passes[i].get() : nullptr};
    MetricValues values;
    try {
      values = entry.metric->compute(own);
    } catch (Error& e) {
      ::oml::detail::add_origin_context(e, "metric", info_of(entry));
      throw;
    } catch (const std::exception& e) {
      ::oml::detail::throw_foreign_error("metric", info_of(entry), e.what(), "while computing");
    } catch (...) {
      ::oml::detail::throw_foreign_error("metric", info_of(entry),
                                         "an exception that is not a std::exception", "while computing");
    }
    check_values(entry, values, inputs.query_rows.size());
    for (auto& [stem, values_of_queries] : values.per_query) {
      for (const auto& [group, members] : groups)
        metrics[group + "/" + stem] = mean_of(values_of_queries, members);
      per_query[stem] = std::move(values_of_queries);
    }
    for (const auto& [key, value] : values.values) metrics[key] = value;
  }
}

namespace {
constexpr const char* kExcludedKey = "metrics_to_exclude_from_visualization";
constexpr const char* kOnlyOverallKey = "visualize_only_overall_category";
constexpr const char* kOnlyOverallAlias = "visualize_only_main_category";  // newer OML versions
}  // namespace

bool VisualizationOptions::excludes(const std::string& per_query_name) const {
  const std::string metric = per_query_name.substr(0, per_query_name.find('/'));
  for (const auto& name : excluded) {
    if (name == per_query_name || name == metric) return true;
  }
  return false;
}

VisualizationOptions visualization_options(const config::Node& metric_args) {
  VisualizationOptions options;
  if (!metric_args.is_map()) return options;
  if (metric_args[kExcludedKey].defined())
    options.excluded = metric_args[kExcludedKey].as<std::vector<std::string>>();
  const config::Node only_overall =
      metric_args[kOnlyOverallKey].defined() ? metric_args[kOnlyOverallKey] : metric_args[kOnlyOverallAlias];
  if (only_overall.defined()) options.only_overall = only_overall.as<bool>();
  return options;
}

MetricTable configure_metrics(const config::Node& metric_args) {
  config::ErrorList errors;
  config::ArgsReader reader(metric_args, "metric_args", errors, "metric_args");
  bool only_overall = false;
  reader.optional("return_only_overall_category", "return_only_main_category", only_overall);
  // The plotting keys: checked here with the others, used where grids are drawn.
  errors.check([&] {
    reader.take(kExcludedKey);
    reader.take_either(kOnlyOverallKey, kOnlyOverallAlias);
    visualization_options(metric_args);
  });
  // Every metric reads its own keys of the one `metric_args:` mapping; then the keys none read.
  const auto& registry = registries().metrics;
  const std::vector<ComponentInfo> infos = registry.infos();
  std::vector<decltype(registries().metrics)::Parsed> parsed;
  bool read_all = true;
  for (const ComponentInfo& info : infos)
    parsed.push_back(registry.parse_shared(info.name, reader, read_all));
  // Keys no metric reads; not when a metric's parse stopped early (its keys would look unknown).
  reader.begin("metric_args");
  reader.set_origin_note("");
  if (read_all) reader.finish();
  errors.throw_if_any();
  std::vector<MetricTable::Entry> entries;
  std::map<std::string, const MetricTable::Entry*> owner;  // stem -> the metric reporting it
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const ComponentInfo& info = infos[i];
    const std::shared_ptr<const Metric> metric = registry.build(parsed[i]);
    if (!metric) continue;
    MetricTable::Entry entry{info.name, info.origin, metric, metric->names()};
    if (entry.names.empty()) continue;
    entries.push_back(std::move(entry));
  }
  for (const auto& entry : entries) {
    for (const auto& stem : entry.names) {
      const auto [found, fresh] = owner.emplace(stem, &entry);
      if (fresh) continue;
      const MetricTable::Entry& first = *found->second;
      broken_contract(info_of(entry).builtin() ? first : entry,
                      "reports '" + kOverall + "/" + stem + "', as does metric '" +
                          (info_of(entry).builtin() ? entry.name : first.name) + "'");
    }
  }
  return MetricTable(std::move(entries), only_overall);
}

}  // namespace oml::metrics
