#pragma once
// Everything a training pipeline records about a run besides checkpoints: train.jsonl,
// metrics.jsonl, the config's logger (TensorBoard by default: a scalar for every logged number),
// the worst-query grids of each validation when `log_images: true` (PNG files under
// images/epoch_NNN/ and logger images) and report.html, refreshed after each validation and at
// the end. Only rank 0 records; on the other ranks every method returns at once. train.jsonl and
// metrics.jsonl are the run's record: failing to write them ends the run. The logger, the grids
// and the report are views of it: their failures are warnings and training goes on.
//
//   RunRecorder recorder(cfg, ctx, paths.root, has_validation);
//   recorder.train_step(record);                      // {"epoch", "step", "loss", "lr", ...}
//   recorder.validation(epoch, step, result, split);  // rank 0's metrics result
//   recorder.finish();
//
// Any pipeline (extractor, pairwise) uses it the same way. A pipeline that wants only the
// logger: report::make_run_logger(cfg.logger, {run_dir}, ctx.is_main()).

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>

#include "oml/config/run_config.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/metric_table.h"
#include "oml/report/run_logger.h"
#include "run_dir.h"

namespace oml::data {
struct DataSplit;
}  // namespace oml::data

namespace oml::pipelines {

struct RunContext;

class RunRecorder {
 public:
  /// `resumed_at_step`: the run continues from its checkpoint at this step (the logger drops
  /// what the killed process logged after it).
  RunRecorder(const config::RunConfig& config, const RunContext& context,
              const std::filesystem::path& run_dir, bool has_validation,
              std::optional<int64_t> resumed_at_step = {});

  /// One line of train.jsonl; every number in it but epoch/step also becomes "train/<key>".
  void train_step(const nlohmann::json& record);
  /// One validation (rank 0 passes its result; other ranks may pass anything): metrics.jsonl,
  /// one scalar per metric key, grids when log_images, then report.html.
  void validation(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                  const data::DataSplit& split);
  /// Rewrites report.html (end of training).
  void finish();

  /// The logger, for anything else a pipeline wants to plot (a NullLogger on ranks other than 0).
  report::RunLogger& logger() { return *logger_; }

 private:
  void write_report();
  void record_grids(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                    const data::DataSplit& split);
  /// Runs `work`; a failure (full disk, unwritable file) is a warning, never the end of training.
  void best_effort(const std::string& what, const std::function<void()>& work);

  bool active_;
  std::filesystem::path run_dir_;
  bool log_images_;
  std::string checkpoint_metric_;
  metrics::VisualizationOptions visualization_;
  bool maximise_;
  std::shared_ptr<report::RunLogger> logger_;
  std::optional<JsonlWriter> train_log_;
  std::optional<JsonlWriter> metrics_log_;
  std::set<std::string> warned_;
};

}  // namespace oml::pipelines
