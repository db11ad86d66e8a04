#include "run_recorder.h"

#include <nlohmann/json.hpp>

#include "oml/common/logging.h"
#include "oml/report/html_report.h"
#include "retrieval_grids.h"
#include "run_context.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {
// Rows per worst-query grid during training: enough to see a pattern, small enough to look at.
constexpr int64_t kWorstQueriesPerGrid = 6;
}  // namespace

RunRecorder::RunRecorder(const config::RunConfig& config, const RunContext& context, const fs::path& run_dir,
                         bool has_validation, std::optional<int64_t> resumed_at_step)
    : active_(context.is_main()),
      run_dir_(run_dir),
      log_images_(config.log_images),
      checkpoint_metric_(config.metric_for_checkpointing),
      visualization_(metrics::visualization_options(config.metric_args)),
      maximise_(config.mode_for_checkpointing == config::CheckpointMode::max) {
  logger_ = report::make_run_logger(config.logger, report::LoggerContext{run_dir, resumed_at_step}, active_);
  if (!active_) return;
  train_log_.emplace(run_dir / "train.jsonl");
  if (has_validation) metrics_log_.emplace(run_dir / "metrics.jsonl");
}

void RunRecorder::best_effort(const std::string& what, const std::function<void()>& work) {
  try {
    work();
  } catch (const std::exception& e) {
    // Once per kind: a full disk would otherwise repeat the same line every step.
    if (warned_.insert(what).second) {
      log::warn(what + " failed: " + e.what() +
                "; training goes on (checkpoints, train.jsonl and metrics.jsonl are unaffected)");
    }
  }
}

void RunRecorder::train_step(const nlohmann::json& record) {
  if (!active_) return;
  train_log_->write(record);
  const int64_t step = record.value("step", int64_t{0});
  best_effort("the logger", [&] {
    for (const auto& item : record.items()) {
      if (item.key() == "epoch" || item.key() == "step" || !item.value().is_number()) continue;
      logger_->log_scalar("train/" + item.key(), item.value().get<double>(), step);
    }
  });
}

void RunRecorder::validation(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                             const data::DataSplit& split) {
  if (!active_) return;
  if (metrics_log_)
    metrics_log_->write(nlohmann::json{{"epoch", epoch}, {"step", step}, {"metrics", result.metrics}});
  best_effort("the logger", [&] {
    for (const auto& [key, value] : result.metrics) logger_->log_scalar(key, value, step);
  });
  if (log_images_)
    best_effort("drawing the worst-query grids", [&] { record_grids(epoch, step, result, split); });
  write_report();
}

void RunRecorder::record_grids(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                               const data::DataSplit& split) {
  {
    GridRequest request;
    request.worst = kWorstQueriesPerGrid;
    // The checkpoint metric's per-query values when it has them (cmc, precision, map), else all.
    const std::string overall = "OVERALL/";
    const std::string key =
        checkpoint_metric_.rfind(overall, 0) == 0 ? checkpoint_metric_.substr(overall.size()) : "";
    request.visualization = visualization_;
    if (result.per_query.count(key) && !visualization_.excludes(key)) request.metrics = {key};
    const auto grids = draw_grids(result, split, request);
    save_grids(grids, report::grid_folder(run_dir_, epoch + 1));
    for (const auto& grid : grids) logger_->log_image("retrieval/" + grid.name, grid.image, step);
  }
}

void RunRecorder::finish() {
  if (!active_) return;
  write_report();
}

void RunRecorder::write_report() {
  best_effort("writing report.html", [&] {
    report::RunReportOptions options;
    options.run_dir = run_dir_;
    options.checkpoint_metric = checkpoint_metric_;
    options.maximise = maximise_;
    const fs::path path = report::write_run_report(options);
    log::debug("report written to " + path.string());
  });
}

}  // namespace oml::pipelines
