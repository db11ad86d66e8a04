#include "run_dir.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>

#include "oml/common/error.h"
#include "oml/io/atomic_file.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

std::string default_run_name(const std::string& postfix) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d_%H-%M-%S", &local);
  return postfix.empty() ? std::string(buffer) : std::string(buffer) + "_" + postfix;
}

RunDir::RunDir(const fs::path& logs_root, const std::string& run_name) : path_(logs_root / run_name) {
  std::error_code ec;
  fs::create_directories(checkpoints(), ec);
  if (ec) throw RuntimeError("cannot create the run directory '" + path_.string() + "': " + ec.message());
}

void RunDir::write_config(const std::string& resolved_yaml) const {
  io::write_file_atomic(path_ / "config.yaml", resolved_yaml);
}

JsonlWriter::JsonlWriter(const fs::path& path) : path_(path), out_(path, std::ios::app) {
  if (!out_) throw RuntimeError("cannot open '" + path.string() + "' for writing");
}

void JsonlWriter::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw RuntimeError("writing '" + path_.string() + "' failed (disk full?)");
}

}  // namespace oml::pipelines
