#pragma once
// Which retrieval grids a command draws (oml-validate --visualize, training with log_images)
// and where they go: PNG files and, during training, the run logger.

#include <filesystem>
#include <string>
#include <vector>

#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/metric_table.h"
#include "oml/report/run_logger.h"

namespace oml::data {
struct DataSplit;
}  // namespace oml::data

namespace oml::pipelines {

struct GridRequest {
  int64_t worst = 0;                 ///< rows of worst queries per metric (0: none)
  std::vector<std::string> metrics;  ///< per-query metrics ("cmc/1", or "OVERALL/cmc/1"); empty: all
  std::vector<int64_t> query_ids;    ///< also one grid of these queries (validation rows, 0-based)
  int64_t top_k = 5;                 ///< retrieved items per row
  /// metric_args' plotting keys: metrics left out when `metrics` is empty, and per-category grids.
  metrics::VisualizationOptions visualization;
  int64_t max_image_pixels = 0;  ///< the run's max_image_pixels (images are read again to draw them)
};

struct NamedGrid {
  std::string name;  ///< file stem and logger tag suffix: "worst_cmc_1", "worst_shoes_cmc_1", "queries"
  report::EncodedImage image;
};

/// The per-query metric behind a metric key: "OVERALL/cmc/1" or "cmc/1" -> "cmc/1". A ConfigError
/// (`what` names the option) lists the per-query metrics when there is none of that name.
std::string per_query_metric(const metrics::EmbeddingMetricsResult& result, const std::string& key,
                             const std::string& what);

/// The grids `request` asks for, drawn from `result` with the images of `split`.
std::vector<NamedGrid> draw_grids(const metrics::EmbeddingMetricsResult& result, const data::DataSplit& split,
                                  const GridRequest& request);

/// Writes each grid as `<folder>/<name>.png` (atomically); returns the paths.
std::vector<std::filesystem::path> save_grids(const std::vector<NamedGrid>& grids,
                                              const std::filesystem::path& folder);

}  // namespace oml::pipelines
