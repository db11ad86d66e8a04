// MLflow's FileStore layout (mlflow/store/tracking/file_store.py of MLflow 3.17), written so that
// MLflow's own client reads it (MlflowClient(tracking_uri="file:...")):
//
//   <root>/0/meta.yaml                       the "Default" experiment, made with the root
//   <root>/.trash/                           deleted experiments
//   <root>/<experiment_id>/meta.yaml         name, artifact_location, lifecycle_stage, times
//   <root>/<experiment_id>/<run_id>/meta.yaml   run info (status as MLflow's RunStatus number)
//   .../<run_id>/metrics/<key>               one line per value: "<timestamp ms> <value> <step>"
//   .../<run_id>/params/<key>, tags/<key>    the value, no newline ("a/b" keys are folders)
//   .../<run_id>/artifacts/                  the run's artifact root (unless the experiment has
//                                            another artifact_location)
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include "mlflow_store.h"
#include "offline_files.h"
#include "oml/common/strings.h"
#include "oml/io/atomic_file.h"

namespace oml::report::mlflow {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTrash = ".trash";

// MLflow's RunStatus enum as stored in meta.yaml.
int status_number(const std::string& status) {
  if (status == "RUNNING") return 1;
  if (status == "SCHEDULED") return 2;
  if (status == "FINISHED") return 3;
  if (status == "FAILED") return 4;
  if (status == "KILLED") return 5;
  throw StoreError("unknown run status '" + status + "'", false);
}

std::string status_name(int number) {
  static const char* names[] = {"RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"};
  return number >= 1 && number <= 5 ? names[number - 1] : "RUNNING";
}

std::string file_uri(const fs::path& path) {
  return "file://" + fs::absolute(path).lexically_normal().string();
}

// Python's repr of a float is what MLflow writes; to_chars gives the same shortest round trip
// (and "nan", "inf", "-inf", which float() reads back).
std::string number_text(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";  // 3 -> "3.0", as Python
  return text;
}

YAML::Node read_yaml(const fs::path& path) {
  try {
    return YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw StoreError(path.string() + ": not a readable MLflow meta.yaml (" + e.what() + ")", false);
  }
}

// A param's or tag's value: written in place (a temporary next to it would be read as another
// param by MLflow).
void write_text(const fs::path& path, const std::string& text) {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw StoreError("cannot write " + path.string(), false);
}

std::string experiment_meta(const std::string& id, const std::string& name,
                            const std::string& artifact_location, const std::string& stage, int64_t created) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "artifact_location" << YAML::Value << artifact_location;
  out << YAML::Key << "creation_time" << YAML::Value << created;
  out << YAML::Key << "experiment_id" << YAML::Value << YAML::SingleQuoted << id;
  out << YAML::Key << "last_update_time" << YAML::Value << created;
  out << YAML::Key << "lifecycle_stage" << YAML::Value << stage;
  out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << name;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string run_meta(const RunInfo& run, const std::string& run_name, const std::string& user, int64_t start,
                     int64_t end) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "artifact_uri" << YAML::Value << run.artifact_uri;
  out << YAML::Key << "end_time" << YAML::Value;
  if (end > 0) {
    out << end;
  } else {
    out << YAML::Null;
  }
  out << YAML::Key << "entry_point_name" << YAML::Value << YAML::SingleQuoted << "";
  out << YAML::Key << "experiment_id" << YAML::Value << YAML::SingleQuoted << run.experiment_id;
  out << YAML::Key << "lifecycle_stage" << YAML::Value << "active";
  out << YAML::Key << "run_id" << YAML::Value << run.run_id;
  out << YAML::Key << "run_name" << YAML::Value << YAML::DoubleQuoted << run_name;
  out << YAML::Key << "source_name" << YAML::Value << YAML::SingleQuoted << "";
  out << YAML::Key << "source_type" << YAML::Value << 4;  // SourceType.LOCAL
  out << YAML::Key << "source_version" << YAML::Value << YAML::SingleQuoted << "";
  out << YAML::Key << "start_time" << YAML::Value << start;
  out << YAML::Key << "status" << YAML::Value << status_number(run.status);
  out << YAML::Key << "tags" << YAML::Value << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
  out << YAML::Key << "user_id" << YAML::Value << YAML::DoubleQuoted << user;
  out << YAML::Key << "deleted_time" << YAML::Value << YAML::Null;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// A random id of MLflow's shape: experiments get a large positive integer, runs a uuid4 hex.
std::mt19937_64& random_engine() {
  thread_local std::mt19937_64 engine{std::random_device{}() ^ static_cast<uint64_t>(detail::unix_time_ms())};
  return engine;
}

std::string new_experiment_id() {
  std::uniform_int_distribution<int64_t> digits(100000000000000000, 999999999999999999);
  return std::to_string(digits(random_engine()));
}

std::string new_run_id() { return detail::uuid4_hex(); }

std::string percent_decode(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

class FileStore final : public Store {
 public:
  FileStore(std::string uri, fs::path root) : uri_(std::move(uri)), root_(std::move(root)) {}

  std::string where() const override { return uri_ + " (" + root_.string() + ")"; }

  std::string experiment_id(const std::string& name, const std::string& artifact_location) override {
    ensure_root();
    if (auto id = find_experiment(root_, name)) return *id;
    if (find_experiment(root_ / kTrash, name)) {
      throw StoreError("experiment '" + name + "' is deleted in " + root_.string() + " (" + kTrash +
                           "): restore it or choose another experiment_name",
                       false);
    }
    for (int attempt = 0;; ++attempt) {
      const std::string id = new_experiment_id();
      std::error_code error;
      if (!fs::create_directory(root_ / id, error)) {
        if (!error && attempt < 10) continue;  // taken: draw again
        throw StoreError("cannot create the experiment folder " + (root_ / id).string() + ": " +
                             (error ? error.message() : std::string("it exists")),
                         false);
      }
      const std::string location = artifact_location.empty() ? file_uri(root_ / id)
                                   : is_local(artifact_location)
                                       ? file_uri(local_path(artifact_location, root_))
                                       : artifact_location;
      replace_file(root_ / id / "meta.yaml",
                   experiment_meta(id, name, location, "active", detail::unix_time_ms()));
      return id;
    }
  }

  RunInfo create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_time,
                     const KeyValues& tags, const std::string& user) override {
    const fs::path experiment = root_ / experiment_id;
    if (!fs::exists(experiment / "meta.yaml"))
      throw StoreError("experiment " + experiment_id + " is not in " + root_.string(), false);
    const std::string location = read_yaml(experiment / "meta.yaml")["artifact_location"].as<std::string>("");
    RunInfo run;
    run.run_id = new_run_id();
    run.experiment_id = experiment_id;
    run.artifact_uri = location + "/" + run.run_id + "/artifacts";
    run.status = "RUNNING";
    const fs::path dir = experiment / run.run_id;
    std::error_code error;
    for (const char* sub : {"metrics", "params", "tags", "artifacts"})
      fs::create_directories(dir / sub, error);
    if (error)
      throw StoreError("cannot create the run folder " + dir.string() + ": " + error.message(), false);
    replace_file(dir / "meta.yaml", run_meta(run, run_name, user, start_time, 0));
    Batch batch;
    batch.tags = tags;
    batch.tags.emplace_back("mlflow.runName", run_name);
    log_batch(run.run_id, batch);
    return run;
  }

  std::optional<RunInfo> get_run(const std::string& run_id) override {
    const auto dir = run_dir(run_id);
    if (!dir) return std::nullopt;
    const YAML::Node meta = read_yaml(*dir / "meta.yaml");
    RunInfo run;
    run.run_id = run_id;
    run.experiment_id = meta["experiment_id"].as<std::string>("");
    run.artifact_uri = meta["artifact_uri"].as<std::string>("");
    run.status = status_name(meta["status"].as<int>(1));
    return run;
  }

  void log_batch(const std::string& run_id, const Batch& batch) override {
    const fs::path dir = require_run(run_id);
    // Keys are relative paths under the run's folder: one that could leave it is never written.
    const auto check_key = [&](const std::string& kind, const std::string& key) {
      if (!is_valid_key(key)) throw StoreError(kind + " key '" + key + "' is not one MLflow accepts", false);
    };
    for (const auto& [key, value] : batch.params) check_key("param", key);
    for (const auto& [key, value] : batch.tags) check_key("tag", key);
    for (const auto& metric : batch.metrics) check_key("metric", metric.key);
    for (const auto& [key, value] : batch.params) {
      const fs::path path = dir / "params" / key;
      if (fs::exists(path)) {
        std::ifstream in(path, std::ios::binary);
        const std::string current((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (current != value) {
          throw StoreError("param '" + key + "' of run " + run_id + " was logged as '" + current +
                               "'; MLflow does not allow changing it to '" + value + "'",
                           false);
        }
        continue;
      }
      write_text(path, value);
    }
    for (const auto& [key, value] : batch.tags) write_text(dir / "tags" / key, value);
    // One open per key and batch: the lines of a key stay in their order.
    std::map<std::string, std::string> lines;
    for (const auto& metric : batch.metrics) {
      lines[metric.key] += std::to_string(metric.timestamp) + " " + number_text(metric.value) + " " +
                           std::to_string(metric.step) + "\n";
    }
    for (const auto& [key, text] : lines) {
      const fs::path path = dir / "metrics" / key;
      std::error_code error;
      fs::create_directories(path.parent_path(), error);
      std::ofstream out(path, std::ios::app | std::ios::binary);
      out << text;
      out.flush();
      if (!out) throw StoreError("cannot append to " + path.string(), false);
    }
  }

  void update_run(const std::string& run_id, const std::string& status, int64_t end_time) override {
    const fs::path dir = require_run(run_id);
    const YAML::Node meta = read_yaml(dir / "meta.yaml");
    RunInfo run;
    run.run_id = run_id;
    run.experiment_id = meta["experiment_id"].as<std::string>("");
    run.artifact_uri = meta["artifact_uri"].as<std::string>("");
    run.status = status;
    const int64_t end =
        end_time > 0 ? end_time : (meta["end_time"].IsNull() ? 0 : meta["end_time"].as<int64_t>(0));
    replace_file(dir / "meta.yaml", run_meta(run, meta["run_name"].as<std::string>(""),
                                             meta["user_id"].as<std::string>("unknown"),
                                             meta["start_time"].as<int64_t>(0), end));
  }

  void log_artifact(const RunInfo& run, const fs::path& file, const std::string& artifact_path) override {
    if (!is_local(run.artifact_uri)) {
      throw StoreError(
          "the run's artifact location " + run.artifact_uri +
              " is not a local folder; a file: tracking URI stores artifacts only in local folders",
          false);
    }
    copy_artifact(local_path(run.artifact_uri, root_), file, artifact_path);
  }

 private:
  // As MLflow's FileStore: a missing root is made with its Default experiment "0" (which MLflow
  // reads back later); the trash folder is made when missing.
  void ensure_root() {
    std::error_code error;
    if (!fs::exists(root_)) {
      fs::create_directories(root_ / "0", error);
      if (error)
        throw StoreError("cannot create the MLflow folder " + root_.string() + ": " + error.message(), false);
      replace_file(root_ / "0" / "meta.yaml",
                   experiment_meta("0", "Default", file_uri(root_ / "0"), "active", detail::unix_time_ms()));
    }
    fs::create_directories(root_ / kTrash, error);
    if (error) throw StoreError("cannot create " + (root_ / kTrash).string() + ": " + error.message(), false);
  }

  static std::optional<std::string> find_experiment(const fs::path& parent, const std::string& name) {
    std::error_code error;
    if (!fs::is_directory(parent, error)) return std::nullopt;
    for (const auto& entry : fs::directory_iterator(parent, error)) {
      const fs::path meta = entry.path() / "meta.yaml";
      if (!entry.is_directory() || !fs::exists(meta)) continue;
      try {
        const YAML::Node node = YAML::LoadFile(meta.string());
        if (node["name"] && node["name"].as<std::string>() == name) return entry.path().filename().string();
      } catch (const YAML::Exception&) {  // not an experiment of ours to judge: MLflow skips it too
      }
    }
    return std::nullopt;
  }

  std::optional<fs::path> run_dir(const std::string& run_id) const {
    static const std::regex valid("[a-zA-Z0-9_-]{1,256}");  // MLflow's run id check
    if (!std::regex_match(run_id, valid)) return std::nullopt;
    std::error_code error;
    if (!fs::is_directory(root_, error)) return std::nullopt;
    for (const auto& entry : fs::directory_iterator(root_, error)) {
      const fs::path dir = entry.path() / run_id;
      if (entry.path().filename() != kTrash && fs::exists(dir / "meta.yaml")) return dir;
    }
    return std::nullopt;
  }

  fs::path require_run(const std::string& run_id) const {
    const auto dir = run_dir(run_id);
    if (!dir) throw StoreError("run " + run_id + " is not in " + root_.string(), false);
    return *dir;
  }

  std::string uri_;
  fs::path root_;
};

}  // namespace

bool is_valid_key(const std::string& key) {
  constexpr std::size_t kMaxKey = 250;  // MLflow's limit for tag keys (and params')
  if (key.empty() || key.size() > kMaxKey) return false;
  for (const char c : key) {
    // MLflow's rule, [/\w.\- :] with Unicode's \w: any byte of a UTF-8 letter counts.
    const auto byte = static_cast<unsigned char>(c);
    if (!(std::isalnum(byte) || byte >= 0x80 || c == '_' || c == '-' || c == '.' || c == ' ' || c == ':' ||
          c == '/'))
      return false;
  }
  for (const auto& part : split(key, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

bool is_local(const std::string& uri) {
  if (starts_with(uri, "file:")) return true;
  const auto colon = uri.find(':');
  const auto slash = uri.find('/');
  return colon == std::string::npos || (slash != std::string::npos && slash < colon);
}

fs::path local_path(const std::string& uri, const fs::path& base) {
  std::string path = uri;
  if (starts_with(path, "file:")) {
    path = path.substr(5);
    if (starts_with(path, "//")) {  // file://host/path: only this host
      const auto end = path.find('/', 2);
      const std::string host = path.substr(2, end == std::string::npos ? std::string::npos : end - 2);
      if (!host.empty() && host != "localhost") {
        throw StoreError("file URI " + uri + " names the host '" + host + "'; only local folders are written",
                         false);
      }
      path = end == std::string::npos ? "/" : path.substr(end);
    }
    path = percent_decode(path);
  }
  const fs::path result(path);
  return (result.is_absolute() ? result : base / result).lexically_normal();
}

void replace_file(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = io::temporary_sibling(path);
  try {
    fs::create_directories(path.parent_path());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << bytes;
      out.flush();
      if (!out) throw StoreError("cannot write " + tmp.string(), false);
    }
    fs::rename(tmp, path);
  } catch (const fs::filesystem_error& e) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw StoreError(e.what(), false);
  }
}

void copy_artifact(const fs::path& artifact_root, const fs::path& file, const std::string& artifact_path) {
  const fs::path target = artifact_root / artifact_path;
  try {
    fs::create_directories(target.parent_path());
    const fs::path tmp = io::temporary_sibling(target);
    fs::copy_file(file, tmp, fs::copy_options::overwrite_existing);
    fs::rename(tmp, target);
  } catch (const std::exception& e) {
    throw StoreError("cannot copy " + file.string() + " to " + target.string() + ": " + e.what(), false);
  }
}

std::unique_ptr<Store> open_file_store(const std::string& uri, const fs::path& base) {
  return std::make_unique<FileStore>(uri, local_path(uri, base));
}

}  // namespace oml::report::mlflow
