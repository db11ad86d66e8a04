#include "oml/report/neptune_run.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>

#include "offline_files.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/io/atomic_file.h"
#include "oml/io/pending_files.h"
#include "oml/report/html_report.h"
#include "oml/version.h"
#include "python_text.h"

namespace oml::report {

namespace fs = std::filesystem;
using detail::unix_time_s;

namespace {

// neptune.constants: the data folder and its offline subfolder; the client's queue file names.
constexpr char kDataDirectory[] = ".neptune";
constexpr char kOfflineDirectory[] = "offline";
constexpr char kUploadDirectory[] = "upload_path";
constexpr char kDataFile[] = "data-1.log";
// The layout the client writes one folder per run in (StructureVersion.DIRECT_DIRECTORY).
constexpr int kStructureVersion = 3;

// An attribute path as the client splits one ("training/OVERALL/cmc/1" -> four parts).
nlohmann::json attribute_path(const std::string& path) {
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& part : split(path, '/'))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

nlohmann::json operation(const std::string& type, const std::string& path) {
  return {{"type", type}, {"path", attribute_path(path)}};
}

nlohmann::json assign(const std::string& type, const std::string& path, nlohmann::json value) {
  nlohmann::json op = operation(type, path);
  op["value"] = std::move(value);
  return op;
}

// What run[path] = stringify_unsupported(value) puts in the queue: Neptune's own types where the
// value has one (ints within 32 bits; wider ones as floats, as the client casts them), the text
// Python makes of it otherwise (None, lists, NaN).
nlohmann::json stringified_assignment(const std::string& path, const nlohmann::json& value) {
  if (value.is_boolean()) return assign("AssignBool", path, value);
  if (value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max())
      return assign("AssignInt", path, v);
    return assign("AssignFloat", path, static_cast<double>(v));
  }
  if (value.is_number_unsigned()) return assign("AssignFloat", path, value.get<double>());
  if (value.is_number_float() && std::isfinite(value.get<double>()))
    return assign("AssignFloat", path, value);
  return assign("AssignString", path, detail::python_str(value));
}

std::string uuid_text(const std::string& hex) {
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

std::string iso_utc(double unix_s) {
  const auto seconds = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &tm);
  char micros[16];
  std::snprintf(micros, sizeof(micros), ".%06d+00:00", static_cast<int>((unix_s - std::floor(unix_s)) * 1e6));
  return std::string(buffer) + micros;
}

std::string operating_system() {
  struct utsname name {};
  if (::uname(&name) != 0) return "Linux";
  return std::string(name.sysname) + "-" + name.release + "-" + name.machine;
}

// The queue's records, in order, from every data-<N>.log of the folder (the client starts a new
// file every 64 MiB). A line cut by a crash at the very end is left out; a bad line elsewhere is
// a DataError.
std::vector<nlohmann::json> read_queue(const fs::path& folder) {
  std::vector<std::pair<int64_t, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (!starts_with(name, "data-") || !ends_with(name, ".log")) continue;
    try {
      files.emplace_back(std::stoll(name.substr(5, name.size() - 9)), entry.path());
    } catch (const std::exception&) {
      continue;  // not one of the queue's files
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> records;
  for (std::size_t f = 0; f < files.size(); ++f) {
    std::ifstream in(files[f].second);
    OML_CHECK(in, DataError, "cannot read the Neptune queue file '", files[f].second.string(), "'");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
      if (!trim(line).empty()) lines.push_back(line);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      auto record = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
      const bool torn_tail = f + 1 == files.size() && i + 1 == lines.size();
      if (record.is_discarded() || !record.contains("obj")) {
        if (torn_tail) break;
        throw DataError(files[f].second.string() + ": line " + std::to_string(i + 1) +
                        " is not a Neptune operation (a damaged file)");
      }
      records.push_back(std::move(record));
    }
  }
  return records;
}

// `record` without the values logged after `step`; nothing when none is left.
std::optional<nlohmann::json> cut_after(nlohmann::json record, int64_t step) {
  auto& obj = record.at("obj");
  if (!obj.contains("values") || !obj.at("values").is_array()) return record;
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& value : obj.at("values"))
    if (!value.contains("step") || value.at("step").is_null() || value.at("step").get<double>() <= step)
      kept.push_back(value);
  if (kept.empty()) return std::nullopt;
  obj["values"] = kept;
  return record;
}

}  // namespace

NeptuneOfflineRun::NeptuneOfflineRun(NeptuneOptions options, const LoggerContext& context,
                                     const nlohmann::json& config)
    : options_(std::move(options)), neptune_dir_(context.run_dir / kDataDirectory) {
  const fs::path offline = neptune_dir_ / kOfflineDirectory;
  if (context.resumed_run_id && !context.resumed_run_id->empty()) {
    id_ = *context.resumed_run_id;
    std::optional<fs::path> earlier;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(offline, ec)) {
      const std::string name = entry.path().filename().string();
      if (name == "run__" + id_ || starts_with(name, "run__" + id_ + "__")) earlier = entry.path();
    }
    if (earlier) {
      try {
        try {
          reopen(*earlier, context.resumed_at_step.value_or(0));
        } catch (const nlohmann::json::exception& e) {  // an operation of an unexpected shape
          throw DataError(earlier->string() + ": " + e.what());
        }
        return;
      } catch (const DataError& e) {
        log::warn(std::string("neptune: cannot continue ") + earlier->string() + " (" + e.what() +
                  "); a new offline run is written");
        out_.close();
        version_ = 0;
        uploaded_.clear();
        id_ = uuid_text(detail::uuid4_hex());
      }
    } else {
      log::warn("neptune: the offline run " + id_ + " this run continues is not under " + offline.string() +
                "; a new offline run is written");
      id_ = uuid_text(detail::uuid4_hex());
    }
  } else {
    id_ = uuid_text(detail::uuid4_hex());
  }
  // The client's folder name: run__<uuid>__<pid>__<8 random characters>.
  dir_ = offline / ("run__" + id_ + "__" + std::to_string(::getpid()) + "__" +
                    detail::random_token(8, "abcdefghijklmnopqrstuvwxyz0123456789"));
  open_new(context, config);
}

NeptuneOfflineRun::~NeptuneOfflineRun() = default;

void NeptuneOfflineRun::open_new(const LoggerContext& context, const nlohmann::json& config) {
  fs::create_directories(dir_ / kUploadDirectory);
  const nlohmann::json metadata = {{"mode", "offline"},
                                   {"containerId", id_},
                                   {"containerType", "run"},
                                   {"structureVersion", kStructureVersion},
                                   {"os", operating_system()},
                                   {"createdAt", iso_utc(unix_time_s())},
                                   {"producer", std::string("oml-cpp ") + OML_VERSION_STRING}};
  io::write_file_atomic(dir_ / "metadata.json", metadata.dump(2) + "\n");
  io::write_file_atomic(dir_ / "last_ack_version", "");
  data_path_ = dir_ / kDataFile;
  out_.open(data_path_, std::ios::binary | std::ios::trunc);
  OML_CHECK(out_, RuntimeError, "cannot create the Neptune queue file '", data_path_.string(), "'");

  put(assign("AssignString", "sys/name", options_.name.empty() ? context.run_name : options_.name));
  put(assign("AssignString", "sys/description", options_.description));
  put(assign("AssignString", "sys/hostname", detail::host_name()));
  // The run's tags as the client takes them at init, then OML's: the config's tags, the postfix,
  // the run folder's name.
  nlohmann::json tags = nlohmann::json::array();
  for (const auto& tag : options_.tags)
    if (!tag.empty()) tags.push_back(tag);
  for (const auto& tag : context.tags)
    if (!tag.empty()) tags.push_back(tag);
  tags.push_back(context.run_name);
  nlohmann::json add_tags = operation("AddStrings", "sys/tags");
  add_tags["values"] = tags;
  put(add_tags);
  put(assign("AssignBool", "sys/failed", false));
  // OML's log_pipeline_info: the config flattened with "|" plus the run folder as `dir`, under
  // Lightning's <prefix>/hyperparams.
  nlohmann::json logged = config.is_object() ? config : nlohmann::json::object();
  logged["dir"] = context.run_name;
  const std::string params = key("hyperparams");
  for (const auto& [name, value] : flatten_config_values(logged, "|"))
    put(stringified_assignment(params + "/" + name, value));
  sync_to_disk();
  log::info("neptune: offline run " + id_ + " in " + dir_.string() + "; upload it with `" + sync_command() +
            "`");
}

void NeptuneOfflineRun::reopen(const fs::path& dir, int64_t resumed_at_step) {
  dir_ = dir;
  data_path_ = dir_ / kDataFile;
  // Every operation the earlier processes queued, but the values logged after the checkpoint's
  // step (logged again now), renumbered 1, 2, 3, ... in one data file.
  std::string kept;
  for (auto& record : read_queue(dir_)) {
    auto cut = cut_after(std::move(record), resumed_at_step);
    if (!cut) continue;
    const auto& obj = cut->at("obj");
    if (obj.value("type", "") == "UploadFile") {
      std::vector<std::string> parts = obj.at("path").get<std::vector<std::string>>();
      uploaded_.insert(join(parts, "/"));
    }
    (*cut)["version"] = ++version_;
    kept += cut->dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace) + "\n";
  }
  io::write_file_atomic(data_path_, kept);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    if (starts_with(name, "data-") && ends_with(name, ".log") && entry.path() != data_path_)
      fs::remove(entry.path());
  }
  fs::create_directories(dir_ / kUploadDirectory);
  out_.open(data_path_, std::ios::binary | std::ios::app);
  OML_CHECK(out_, RuntimeError, "cannot append to the Neptune queue file '", data_path_.string(), "'");
  put(assign("AssignBool", "sys/failed", false));
  sync_to_disk();
  log::info("neptune: continuing offline run " + id_ + " in " + dir_.string() + " after step " +
            std::to_string(resumed_at_step));
}

void NeptuneOfflineRun::put(nlohmann::json op) {
  const nlohmann::json record = {{"obj", std::move(op)}, {"version", ++version_}, {"at", unix_time_s()}};
  const std::string line =
      record.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace) + "\n";
  out_.write(line.data(), static_cast<std::streamsize>(line.size()));
  OML_CHECK(out_, RuntimeError, "cannot write the Neptune queue file '", data_path_.string(), "'");
}

void NeptuneOfflineRun::sync_to_disk() {
  out_.flush();
  OML_CHECK(out_, RuntimeError, "cannot write the Neptune queue file '", data_path_.string(), "'");
  const fs::path version_file = dir_ / "last_put_version";
  if (io::interrupt_signal() != 0) {
    // finish() of an interrupted run runs as an interrupt hook, which must not create a
    // PendingFile (io/pending_files.h: the cleanup holds their lock): the few bytes are written in
    // place, as Neptune's own client writes this file.
    std::ofstream out(version_file, std::ios::binary | std::ios::trunc);
    out << version_;
    out.flush();
    OML_CHECK(out, RuntimeError, "cannot write the Neptune version file '", version_file.string(), "'");
    return;
  }
  io::write_file_atomic(version_file, std::to_string(version_));
}

void NeptuneOfflineRun::begin_step(int64_t step) {
  // The previous step's operations go to the system now, whatever ends the process later; the
  // version file (synced to the disk) waits for the epoch's end: a sync reads the data file to
  // its end anyway.
  if (step_ && *step_ != step) {
    out_.flush();
    OML_CHECK(out_, RuntimeError, "cannot write the Neptune queue file '", data_path_.string(), "'");
  }
  step_ = step;
}

std::string NeptuneOfflineRun::key(const std::string& tag) const {
  return options_.prefix.empty() ? tag : options_.prefix + "/" + tag;
}

std::string NeptuneOfflineRun::sync_command() const {
  std::string command = "neptune sync --path " + neptune_dir_.parent_path().string();
  if (!options_.project.empty()) command += " --project " + options_.project;
  return command + " --object offline/" + id_;
}

void NeptuneOfflineRun::log_scalar(const std::string& tag, double value, int64_t step) {
  if (finished_) return;
  begin_step(step);
  if (!std::isfinite(value)) {
    // Neptune's series hold finite values only; its client drops the others with a warning too.
    if (!warned_non_finite_)
      log::warn("neptune: " + tag + " is " + detail::python_float_repr(value) + " at step " +
                std::to_string(step) + "; Neptune takes finite values only, so such values are left out");
    warned_non_finite_ = true;
    return;
  }
  nlohmann::json op = operation("LogFloats", key(tag));
  op["values"] = nlohmann::json::array({{{"value", value}, {"step", step}, {"ts", unix_time_s()}}});
  put(std::move(op));
}

void NeptuneOfflineRun::log_image(const std::string& tag, const EncodedImage& image, int64_t step) {
  if (finished_) return;
  begin_step(step);
  // OML logs its figures on the run itself (experiment[title].log(File.as_image(fig))): no prefix.
  nlohmann::json op = operation("LogImages", tag);
  const nlohmann::json value = {{"data", base64(image.png)}, {"name", nullptr}, {"description", nullptr}};
  op["values"] = nlohmann::json::array({{{"value", value}, {"step", step}, {"ts", unix_time_s()}}});
  put(std::move(op));
}

void NeptuneOfflineRun::log_file(const fs::path& file, const std::string& name) {
  if (finished_) return;
  if (name == "config.yaml") {
    upload(file, "oml/config", "yaml");
  } else if (name == "report.html") {
    upload(file, "oml/report", "html");
  } else if (starts_with(name, "checkpoints/") && options_.log_model_checkpoints) {
    // Lightning's NeptuneLogger: <prefix>/model/checkpoints/<name without extension>, and the
    // best one's path.
    const fs::path checkpoint(name.substr(std::string("checkpoints/").size()));
    const std::string ext = checkpoint.extension().string();
    upload(file, key("model/checkpoints/" + checkpoint.stem().string()), ext.empty() ? "" : ext.substr(1));
    if (checkpoint.stem() == "best")
      put(assign("AssignString", key("model/best_model_path"), fs::absolute(file).string()));
  }
}

void NeptuneOfflineRun::upload(const fs::path& file, const std::string& attribute, const std::string& ext) {
  // One file per attribute under upload_path/, replaced by each newer version: the upload takes
  // the last one, and a checkpoint rewritten every epoch costs no disk twice.
  std::string tmp_name = attribute;
  std::replace(tmp_name.begin(), tmp_name.end(), '/', '_');
  if (!ext.empty()) tmp_name += "." + ext;
  detail::link_or_copy(file, dir_ / kUploadDirectory / tmp_name);
  if (!uploaded_.insert(attribute).second) return;
  nlohmann::json op = operation("UploadFile", attribute);
  op["ext"] = ext;
  op["file_path"] = nullptr;
  op["tmp_file_name"] = tmp_name;
  op["clean_after_upload"] = false;
  put(std::move(op));
}

void NeptuneOfflineRun::flush() {
  if (finished_) return;
  sync_to_disk();
}

void NeptuneOfflineRun::finish(RunStatus status) {
  if (finished_) return;
  // Lightning's finalize(status) and the client's failure mark.
  put(assign("AssignString", key("status"), status == RunStatus::finished ? "success" : "failed"));
  if (status != RunStatus::finished) put(assign("AssignBool", "sys/failed", true));
  finished_ = true;
  sync_to_disk();
  log::info("neptune: offline run " + id_ + " " +
            (status == RunStatus::finished ? "finished" : "ended " + run_status_name(status)) +
            "; upload it with `" + sync_command() + "`");
}

}  // namespace oml::report
