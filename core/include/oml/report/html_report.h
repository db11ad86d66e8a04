#pragma once
// report.html: one self-contained page per training run that a browser opens without a server or
// network — the resolved config, loss / lr / loss-log curves from train.jsonl, every metric over
// the epochs from metrics.jsonl, the best checkpoint's metrics per category and the latest
// worst-query grids (PNG files embedded as base64 data URIs). Charts are inline SVG.

#include <filesystem>
#include <string>

namespace oml::report {

struct RunReportOptions {
  std::filesystem::path run_dir;  ///< reads config.yaml, train.jsonl, metrics.jsonl, images/
  std::string title;              ///< page title (default: the folder name)
  std::string checkpoint_metric = "OVERALL/cmc/1";  ///< which metrics.jsonl record is "best"
  bool maximise = true;                             ///< mode_for_checkpointing == max
};

/// The page's HTML. Missing files leave their section saying so (a run that has not validated
/// yet still gets a page); malformed JSON lines are a DataError naming the file and line.
std::string render_run_report(const RunReportOptions& options);

/// Writes run_dir/report.html atomically (a browser never sees half a page); returns its path.
std::filesystem::path write_run_report(const RunReportOptions& options);

/// Folder of the grids of one validation: run_dir/images/epoch_<NNN> (1-based epoch number).
std::filesystem::path grid_folder(const std::filesystem::path& run_dir, int64_t epoch_number);

/// RFC 4648 base64 (for data URIs).
std::string base64(const std::string& bytes);

}  // namespace oml::report
