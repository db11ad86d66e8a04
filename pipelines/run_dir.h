#pragma once
// The run directory of a training run (docs/contracts.md#run-directory): logs_root/run_name
// holding the resolved config.yaml, metrics.jsonl, train.jsonl and checkpoints/.

#include <nlohmann/json_fwd.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace oml::pipelines {

/// "2026-11-22_01-52-07" + ("_" + postfix when given).
std::string default_run_name(const std::string& postfix);

class RunDir {
 public:
  /// Creates logs_root/run_name and its checkpoints/ folder (existing ones are reused: a
  /// resumed run appends to its logs).
  RunDir(const std::filesystem::path& logs_root, const std::string& run_name);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path checkpoints() const { return path_ / "checkpoints"; }

  /// Writes config.yaml atomically.
  void write_config(const std::string& resolved_yaml) const;

 private:
  std::filesystem::path path_;
};

/// Appends one JSON object per line and flushes after each, so a killed run keeps every line
/// it finished writing.
class JsonlWriter {
 public:
  explicit JsonlWriter(const std::filesystem::path& path);
  void write(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace oml::pipelines
