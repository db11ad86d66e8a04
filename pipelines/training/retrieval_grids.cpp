#include "training/retrieval_grids.h"

#include <cstdio>
#include <map>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/io/atomic_file.h"
#include "oml/report/retrieval_grid.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

std::string slug(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string note(const std::string& metric, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%s = %.3g", metric.c_str(), value);
  return buffer;
}

}  // namespace

std::string per_query_metric(const metrics::EmbeddingMetricsResult& result, const std::string& key,
                             const std::string& what) {
  if (result.per_query.count(key)) return key;
  const std::string prefix = "OVERALL/";
  if (key.rfind(prefix, 0) == 0 && result.per_query.count(key.substr(prefix.size())))
    return key.substr(prefix.size());
  std::vector<std::string> known;
  for (const auto& kv : result.per_query) known.push_back(kv.first);
  throw ConfigError(what + ": '" + key + "' has no per-query values; per-query metrics are " + join(known) +
                    " (fnmr@fmr and pcf describe the whole set, not single queries)");
}

std::vector<NamedGrid> draw_grids(const metrics::EmbeddingMetricsResult& result, const data::DataSplit& split,
                                  const GridRequest& request) {
  report::RetrievalGridOptions options;
  options.top_k = request.top_k;
  options.max_image_pixels = request.max_image_pixels;
  std::vector<NamedGrid> grids;
  if (request.worst > 0) {
    std::vector<std::string> names;
    if (request.metrics.empty()) {
      for (const auto& kv : result.per_query) {
        if (!request.visualization.excludes(kv.first)) names.push_back(kv.first);
      }
    } else {
      for (const auto& key : request.metrics)
        names.push_back(per_query_metric(result, key, "the visualised metric"));
    }
    // Query positions of each category (visualize_only_overall_category: false).
    std::map<std::string, std::vector<int64_t>> by_category;
    if (!request.visualization.only_overall && split.has_categories()) {
      for (std::size_t q = 0; q < result.query_dataset_indices.size(); ++q) {
        by_category[split.categories[result.query_dataset_indices[q]]].push_back(static_cast<int64_t>(q));
      }
    }
    auto add_worst = [&](const std::string& stem, const std::string& name,
                         const std::vector<int64_t>& among) {
      const std::vector<double>& all = result.per_query.at(name);
      std::vector<double> values;
      for (int64_t q : among) values.push_back(all[q]);
      std::vector<int64_t> queries;
      for (int64_t i : report::worst_queries(values, request.worst)) queries.push_back(among[i]);
      if (queries.empty()) return;
      std::vector<std::string> notes;
      for (int64_t q : queries) notes.push_back(note(name, all[q]));
      grids.push_back({stem, report::draw_retrieval_grid(result.retrieval, queries, split, options, notes)});
    };
    std::vector<int64_t> every_query(result.query_dataset_indices.size());
    for (std::size_t q = 0; q < every_query.size(); ++q) every_query[q] = static_cast<int64_t>(q);
    for (const auto& name : names) {
      add_worst("worst_" + slug(name), name, every_query);
      for (const auto& [category, members] : by_category) {
        add_worst("worst_" + slug(category) + "_" + slug(name), name, members);
      }
    }
  }
  if (!request.query_ids.empty()) {
    const std::vector<int64_t> queries = report::queries_with_ids(result.retrieval, request.query_ids);
    std::vector<std::string> notes;
    for (int64_t q : queries) {
      std::string text;
      for (const auto& kv : result.per_query)
        text += (text.empty() ? "" : "  ") + note(kv.first, kv.second[q]);
      notes.push_back(text);
    }
    grids.push_back(
        {"queries", report::draw_retrieval_grid(result.retrieval, queries, split, options, notes)});
  }
  return grids;
}

std::vector<fs::path> save_grids(const std::vector<NamedGrid>& grids, const fs::path& folder) {
  std::vector<fs::path> paths;
  for (const auto& grid : grids) {
    paths.push_back(folder / (grid.name + ".png"));
    io::write_file_atomic(paths.back(), grid.image.png);
  }
  return paths;
}

}  // namespace oml::pipelines
