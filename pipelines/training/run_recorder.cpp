#include "training/run_recorder.h"

#include <nlohmann/json.hpp>

#include "oml/common/logging.h"
#include "oml/io/pending_files.h"
#include "oml/report/html_report.h"
#include "runtime/run_context.h"
#include "training/retrieval_grids.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {
// Rows per worst-query grid during training: enough to see a pattern, small enough to look at.
constexpr int64_t kWorstQueriesPerGrid = 6;
}  // namespace

// How long the interrupt's thread waits for the training thread to leave the logger before it
// gives up marking the run KILLED (the process ends either way).
constexpr auto kInterruptWait = std::chrono::seconds(3);

RunRecorder::RunRecorder(const config::RunConfig& config, const RunContext& context, const fs::path& run_dir,
                         RecorderOptions options)
    : active_(context.is_main()),
      run_dir_(run_dir),
      log_images_(config.log_images),
      checkpoint_metric_(config.metric_for_checkpointing),
      visualization_(metrics::visualization_options(config.metric_args)),
      max_image_pixels_(config.max_image_pixels),
      maximise_(config.mode_for_checkpointing == config::CheckpointMode::max) {
  report::LoggerContext logger_context;
  logger_context.run_dir = run_dir;
  logger_context.run_name = run_dir.filename().string();
  logger_context.tags = config.tags;
  if (!config.postfix.empty()) logger_context.tags.push_back(config.postfix);
  logger_context.config_yaml = std::move(options.config_yaml);
  logger_context.resumed_at_step = options.resumed_at_step;
  // Checkpoints save "<logger>:<id>": a run resumed with another logger starts a new tracker run
  // instead of handing W&B an MLflow id (or the other way round).
  logger_name_ = config.logger ? config.logger->name : "";
  if (options.resumed_logger_run_id) {
    const std::string& saved = *options.resumed_logger_run_id;
    const std::string prefix = logger_name_ + ":";
    if (saved.rfind(prefix, 0) == 0) {
      logger_context.resumed_run_id = saved.substr(prefix.size());
    } else if (active_) {
      log::info("the checkpoint's tracker run (" + saved + ") is not a '" + logger_name_ +
                "' run; the logger starts a new one");
    }
  }
  logger_ = report::make_run_logger(config.logger, logger_context, active_);
  if (!active_) return;
  train_log_.emplace(run_dir / "train.jsonl");
  if (options.has_validation) metrics_log_.emplace(run_dir / "metrics.jsonl");
  interrupt_hook_ = std::make_unique<io::InterruptHook>([this](int) {
    std::unique_lock<std::timed_mutex> lock(logger_mutex_, std::defer_lock);
    if (lock.try_lock_for(kInterruptWait)) end_logger_run(report::RunStatus::killed);
  });
  if (fs::exists(run_dir / "config.yaml"))
    with_logger([&](report::RunLogger& logger) { logger.log_file(run_dir / "config.yaml", "config.yaml"); });
}

RunRecorder::~RunRecorder() {
  interrupt_hook_.reset();  // from here on an interrupt finds no hook of ours
  if (!active_) return;
  const std::lock_guard<std::timed_mutex> lock(logger_mutex_);
  try {
    end_logger_run(report::RunStatus::failed);
  } catch (const std::exception& e) {
    log::warn(std::string("the logger failed to end its run: ") + e.what());
  }
}

void RunRecorder::end_logger_run(report::RunStatus status) {
  if (ended_) return;
  ended_ = true;
  logger_->finish(status);
}

void RunRecorder::with_logger(const std::function<void(report::RunLogger&)>& work) {
  if (!active_) return;
  const std::lock_guard<std::timed_mutex> lock(logger_mutex_);
  if (ended_) return;
  best_effort("the logger", [&] { work(*logger_); });
}

std::string RunRecorder::logger_run_id() const {
  const std::string id = active_ ? logger_->run_id() : std::string();
  return id.empty() ? id : logger_name_ + ":" + id;
}

void RunRecorder::end_of_epoch() {
  with_logger([](report::RunLogger& logger) { logger.flush(); });
}

void RunRecorder::checkpoint_written(const fs::path& path) {
  with_logger(
      [&](report::RunLogger& logger) { logger.log_file(path, "checkpoints/" + path.filename().string()); });
}

void RunRecorder::best_effort(const std::string& what, const std::function<void()>& work) {
  try {
    work();
  } catch (const std::exception& e) {
    // Once per kind: a full disk would otherwise repeat the same line every step.
    const std::lock_guard<std::mutex> lock(warned_mutex_);
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
  with_logger([&](report::RunLogger& logger) {
    for (const auto& item : record.items()) {
      if (item.key() == "epoch" || item.key() == "step" || !item.value().is_number()) continue;
      logger.log_scalar("train/" + item.key(), item.value().get<double>(), step);
    }
  });
}

void RunRecorder::validation(int64_t epoch, int64_t step, const metrics::EmbeddingMetricsResult& result,
                             const data::DataSplit& split) {
  if (!active_) return;
  if (metrics_log_)
    metrics_log_->write(nlohmann::json{{"epoch", epoch}, {"step", step}, {"metrics", result.metrics}});
  with_logger([&](report::RunLogger& logger) {
    for (const auto& [key, value] : result.metrics) logger.log_scalar(key, value, step);
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
    request.max_image_pixels = max_image_pixels_;
    if (result.per_query.count(key) && !visualization_.excludes(key)) request.metrics = {key};
    const auto grids = draw_grids(result, split, request);
    save_grids(grids, report::grid_folder(run_dir_, epoch + 1));
    with_logger([&](report::RunLogger& logger) {
      for (const auto& grid : grids) logger.log_image("retrieval/" + grid.name, grid.image, step);
    });
  }
}

void RunRecorder::finish() {
  if (!active_) return;
  write_report();
  const fs::path report = run_dir_ / "report.html";
  if (fs::exists(report))
    with_logger([&](report::RunLogger& logger) { logger.log_file(report, "report.html"); });
  const std::lock_guard<std::timed_mutex> lock(logger_mutex_);
  best_effort("the logger", [&] { end_logger_run(report::RunStatus::finished); });
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
