#include "oml/report/clearml_task.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "offline_files.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/sha256.h"
#include "oml/common/strings.h"
#include "oml/io/atomic_file.h"
#include "oml/version.h"
#include "python_text.h"

namespace oml::report {

namespace fs = std::filesystem;
using detail::unix_time_ms;
using detail::unix_time_s;

namespace {

// The session folder's files (clearml's Task._offline_filename, Metrics and TaskHandler's).
constexpr char kTaskFile[] = "task.json";
constexpr char kMetricsFile[] = "metrics.jsonl";
constexpr char kLogFile[] = "log.jsonl";

std::string json_line(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace) + "\n";
}

// Python's type name of a config value, as Task.connect records it ("list/int" for a list whose
// items share one type).
std::string python_type(const nlohmann::json& value) {
  if (value.is_boolean()) return "bool";
  if (value.is_number_integer() || value.is_number_unsigned()) return "int";
  if (value.is_number_float()) return "float";
  if (value.is_string()) return "str";
  if (value.is_object()) return "dict";
  if (value.is_null()) return "NoneType";
  std::string item;
  for (const auto& element : value) {
    const std::string type = python_type(element);
    if (!item.empty() && item != type) return "list";
    item = type;
  }
  return item.empty() ? "list" : "list/" + item;
}

// One hyperparameter of the "General" section, as Task.connect(dict) stores it: str() of a
// scalar, json.dumps() of a list or dict, None as an empty value without a type.
nlohmann::json hyperparameter(const std::string& name, const nlohmann::json& value) {
  nlohmann::json out = {{"section", "General"}, {"name", name}, {"description", ""}};
  if (value.is_null()) {
    out["value"] = "";
    return out;
  }
  out["type"] = python_type(value);
  out["value"] =
      value.is_array() || value.is_object() ? detail::python_json_dumps(value) : detail::python_str(value);
  return out;
}

// A name as one folder of a debug-image or artifact path: ClearML writes "/" as ".slash."; other
// characters that a path or URL would misread become "_".
std::string path_segment(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (c == '/') {
      out += ".slash.";
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') {
      out.push_back(c);
    } else {
      out.push_back('_');
    }
  }
  return out.empty() || out == "." || out == ".." ? "_" + out : out;
}

std::string content_type(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".yaml" || ext == ".yml") return "text/yaml";
  if (ext == ".html") return "text/html";
  if (ext == ".png") return "image/png";
  return "application/octet-stream";
}

}  // namespace

const std::vector<std::string>& clearml_task_types() {
  static const std::vector<std::string> kTypes{"training",    "testing", "inference",  "data_processing",
                                               "application", "monitor", "controller", "optimizer",
                                               "service",     "qc",      "custom"};
  return kTypes;
}

ClearmlOfflineTask::ClearmlOfflineTask(ClearmlOptions options, const LoggerContext& context,
                                       const nlohmann::json& config)
    : options_(std::move(options)) {
  const fs::path root = context.run_dir / "clearml";
  if (context.resumed_run_id && !context.resumed_run_id->empty()) {
    const fs::path earlier = root / *context.resumed_run_id;
    if (fs::exists(earlier / kTaskFile)) {
      try {
        id_ = *context.resumed_run_id;
        try {
          reopen(earlier, context.resumed_at_step.value_or(0));
        } catch (const nlohmann::json::exception& e) {  // a task or event of an unexpected shape
          throw DataError(earlier.string() + ": " + e.what());
        }
        return;
      } catch (const DataError& e) {
        log::warn(std::string("clearml: cannot continue ") + earlier.string() + " (" + e.what() +
                  "); a new offline session is written");
        metrics_.close();
      }
    } else {
      log::warn("clearml: the offline session " + *context.resumed_run_id +
                " this run continues is not under " + root.string() + "; a new offline session is written");
    }
  }
  id_ = "offline-" + detail::uuid4_hex();
  dir_ = fs::absolute(root / id_);
  open_new(context, config);
}

ClearmlOfflineTask::~ClearmlOfflineTask() = default;

std::string ClearmlOfflineTask::data_prefix() const {
  return path_segment(task_.at("project_name").get<std::string>()) + "/" +
         path_segment(task_.at("name").get<std::string>()) + "." + id_;
}

void ClearmlOfflineTask::open_new(const LoggerContext& context, const nlohmann::json& config) {
  fs::create_directories(dir_ / "data");
  // OML's ClearMLPipelineLogger: the config flattened with "|" plus the run folder as `dir`,
  // connected as a dict (the "General" section); its tags: the config's, postfix, run folder.
  nlohmann::json logged = config.is_object() ? config : nlohmann::json::object();
  logged["dir"] = context.run_name;
  nlohmann::json general = nlohmann::json::object();
  for (const auto& [name, value] : flatten_config_values(logged, "|"))
    general[name] = hyperparameter(name, value);
  nlohmann::json tags = nlohmann::json::array();
  for (const auto& tag : options_.tags)
    if (!tag.empty()) tags.push_back(tag);
  for (const auto& tag : context.tags)
    if (!tag.empty()) tags.push_back(tag);
  tags.push_back(context.run_name);
  task_ = {{"id", id_},
           {"name", options_.task_name.empty() ? context.run_name : options_.task_name},
           {"project_name", options_.project_name},
           {"type", options_.task_type},
           {"tags", tags},
           {"comment", std::string("Written offline by oml-cpp ") + OML_VERSION_STRING + " in " +
                           fs::absolute(context.run_dir).string()},
           {"hyperparams", {{"General", general}}},
           // What ClearML's Hydra binding stores for an OML run: the resolved config.
           {"configuration",
            {{"OmegaConf",
              {{"name", "OmegaConf"},
               {"type", "OmegaConf"},
               {"value", context.config_yaml},
               {"description", "the resolved config (config.yaml)"}}}}},
           {"execution", {{"artifacts", nlohmann::json::array()}, {"parameters", nlohmann::json::object()}}},
           {"output", nlohmann::json::object()},
           {"offline_folder", dir_.string()},
           {"offline_output_models", nlohmann::json::array()}};
  write_task();
  metrics_.open(dir_ / kMetricsFile, std::ios::binary | std::ios::trunc);
  OML_CHECK(metrics_, RuntimeError, "cannot create '", (dir_ / kMetricsFile).string(), "'");
  write_log("info", std::string("oml-cpp ") + OML_VERSION_STRING + ": training run " +
                        fs::absolute(context.run_dir).string());
  log::info("clearml: offline session " + id_ + " in " + dir_.string() + "; upload it with " +
            "Task.import_offline_session (docs/reports.md#clearml)");
}

void ClearmlOfflineTask::reopen(const fs::path& dir, int64_t resumed_at_step) {
  dir_ = fs::absolute(dir);
  std::ifstream task_in(dir_ / kTaskFile);
  task_ = nlohmann::json::parse(task_in, nullptr, /*allow_exceptions=*/false);
  OML_CHECK(task_.is_object() && task_.contains("name") && task_.contains("project_name"), DataError,
            (dir_ / kTaskFile).string(), " is not a ClearML offline task (a damaged file)");
  // The run folder may have moved since: the import finds artifacts through offline_folder.
  const std::string old_folder = task_.value("offline_folder", "");
  task_["offline_folder"] = dir_.string();
  for (auto& artifact : task_["execution"]["artifacts"]) {
    const std::string uri = artifact.value("uri", "");
    if (!old_folder.empty() && starts_with(uri, old_folder))
      artifact["uri"] = dir_.string() + uri.substr(old_folder.size());
  }
  // Every event the earlier processes wrote but those after the checkpoint's step (logged again
  // now); a line cut by a crash at the end is dropped.
  const fs::path metrics = dir_ / kMetricsFile;
  std::string kept;
  {
    std::ifstream in(metrics);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
      if (!trim(line).empty()) lines.push_back(line);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto events = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
      if (!events.is_array()) {
        if (i + 1 == lines.size()) break;
        throw DataError(metrics.string() + ": line " + std::to_string(i + 1) +
                        " is not a list of ClearML events (a damaged file)");
      }
      nlohmann::json before = nlohmann::json::array();
      for (const auto& event : events)
        if (!event.contains("iter") || !event.at("iter").is_number() ||
            event.at("iter").get<double>() <= static_cast<double>(resumed_at_step))
          before.push_back(event);
      if (!before.empty()) kept += json_line(before);
    }
  }
  io::write_file_atomic(metrics, kept);
  std::error_code ignored;
  fs::remove(dir_.string() + ".zip", ignored);  // the earlier process's, rewritten at the end
  write_task();
  metrics_.open(metrics, std::ios::binary | std::ios::app);
  OML_CHECK(metrics_, RuntimeError, "cannot append to '", metrics.string(), "'");
  write_log("info", "oml-cpp: resumed from the checkpoint of step " + std::to_string(resumed_at_step));
  log::info("clearml: continuing offline session " + id_ + " in " + dir_.string() + " after step " +
            std::to_string(resumed_at_step));
}

void ClearmlOfflineTask::write_task() { io::write_file_atomic(dir_ / kTaskFile, task_.dump(2) + "\n"); }

void ClearmlOfflineTask::write_log(const std::string& level, const std::string& message) {
  const nlohmann::json event = {
      {"timestamp", unix_time_ms()},   {"type", "log"}, {"task", id_}, {"level", level},
      {"worker", detail::host_name()}, {"msg", message}};
  std::ofstream out(dir_ / kLogFile, std::ios::binary | std::ios::app);
  out << json_line(nlohmann::json::array({event}));
  OML_CHECK(out.flush(), RuntimeError, "cannot write '", (dir_ / kLogFile).string(), "'");
}

void ClearmlOfflineTask::begin_step(int64_t step) {
  if (step_ && *step_ != step) write_events();  // the previous step is whole on disk
  step_ = step;
}

void ClearmlOfflineTask::write_events() {
  if (events_.empty()) return;
  metrics_ << json_line(events_);
  metrics_.flush();
  OML_CHECK(metrics_, RuntimeError, "cannot write '", (dir_ / kMetricsFile).string(), "'");
  events_ = nlohmann::json::array();
}

void ClearmlOfflineTask::log_scalar(const std::string& tag, double value, int64_t step) {
  if (finished_) return;
  begin_step(step);
  if (!std::isfinite(value)) {
    // A JSON event cannot hold NaN or infinity.
    if (!warned_non_finite_)
      log::warn("clearml: " + tag + " is " + detail::python_float_repr(value) + " at step " +
                std::to_string(step) + "; such values are left out of the ClearML session");
    warned_non_finite_ = true;
    return;
  }
  // OML's ClearMLLogger.log_metrics: report_scalar(title=key, series=key, iteration=step).
  events_.push_back({{"timestamp", unix_time_ms()},
                     {"type", "training_stats_scalar"},
                     {"task", id_},
                     {"iter", step},
                     {"metric", tag},
                     {"variant", tag},
                     {"value", value}});
}

void ClearmlOfflineTask::log_image(const std::string& tag, const EncodedImage& image, int64_t step) {
  if (finished_) return;
  begin_step(step);
  // A debug image (OML's report_matplotlib_figure(title, series="", report_image=True)): the
  // file under data/<key>, which the import uploads and points the event at.
  char file_name[64];
  std::snprintf(file_name, sizeof(file_name), "__%08lld.png", static_cast<long long>(step));
  const std::string metric = path_segment(tag);
  const std::string key = data_prefix() + "/metrics/" + metric + "/" + metric + file_name;
  const fs::path file = dir_ / "data" / key;
  fs::create_directories(file.parent_path());
  io::write_file_atomic(file, image.png);
  events_.push_back({{"timestamp", unix_time_ms()},
                     {"type", "training_debug_image"},
                     {"task", id_},
                     {"iter", step},
                     {"metric", tag},
                     {"variant", ""},
                     {"key", key},
                     {"url", file.string()}});
}

void ClearmlOfflineTask::log_file(const fs::path& file, const std::string& name) {
  if (finished_) return;
  // OML's ClearML logger uploads no checkpoints; the config and the report go as artifacts.
  if (name == "config.yaml") add_artifact(file, "config");
  if (name == "report.html") add_artifact(file, "report");
}

void ClearmlOfflineTask::add_artifact(const fs::path& file, const std::string& name) {
  const std::string relative = data_prefix() + "/artifacts/" + name + "/" + file.filename().string();
  const fs::path copy = dir_ / "data" / relative;
  detail::link_or_copy(file, copy);
  const auto size = fs::file_size(copy);
  // Task.upload_artifact's record of a file (the import uploads it and rewrites the uri).
  const nlohmann::json artifact = {
      {"key", name},
      {"type", "custom"},
      {"mode", "output"},
      {"uri", copy.string()},
      {"hash", sha256_file_hex(copy)},
      {"content_size", size},
      {"timestamp", static_cast<int64_t>(unix_time_s())},
      {"type_data",
       {{"content_type", content_type(copy)},
        {"preview", file.filename().string() + " - " + std::to_string(size) + " bytes\n"}}}};
  auto& artifacts = task_["execution"]["artifacts"];
  const auto same = std::find_if(artifacts.begin(), artifacts.end(),
                                 [&](const nlohmann::json& a) { return a.value("key", "") == name; });
  if (same != artifacts.end()) {
    *same = artifact;
  } else {
    artifacts.push_back(artifact);
  }
  write_task();
}

void ClearmlOfflineTask::flush() {
  if (finished_) return;
  write_events();
}

void ClearmlOfflineTask::finish(RunStatus status) {
  if (finished_) return;
  write_events();
  // The import marks every session completed; how the run ended is in its console log.
  write_log(status == RunStatus::finished ? "info" : "error",
            "oml-cpp: the run ended " + run_status_name(status));
  finished_ = true;
  metrics_.close();
  detail::write_zip(dir_, dir_.string() + ".zip");
  log::info("clearml: offline session " + id_ + " " +
            (status == RunStatus::finished ? "finished" : "ended " + run_status_name(status)) +
            "; import it with " + "Task.import_offline_session(\"" + dir_.string() + ".zip\")");
}

}  // namespace oml::report
