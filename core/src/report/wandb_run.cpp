#include "oml/report/wandb_run.h"

#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iterator>

#include "little_endian.h"
#include "offline_files.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/io/pending_files.h"
#include "oml/version.h"
#include "wandb_record.pb.h"

namespace oml::report {

namespace fs = std::filesystem;

namespace {

using detail::get_le;
using detail::host_name;
using detail::put_le;
using detail::unix_time_s;

// W&B's datastore (wandb/sdk/internal/datastore.py): LevelDB's log format behind its own header.
constexpr char kIdent[] = ":W&B";
constexpr uint16_t kMagic = 0xBEE1;
constexpr uint8_t kVersion = 0;
constexpr int64_t kFileHeaderSize = 7;
constexpr int64_t kBlockSize = 32768;
constexpr int64_t kRecordHeaderSize = 7;
enum ChunkType : uint8_t { kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };
// What W&B 0.29-0.31 write as the lowest reader version of the format.
constexpr char kMinConsumer[] = "0.70.0";
// Exit codes as the process ends: 1 for an error, 128 + the signal for an interrupt (130 for
// Ctrl-C, 143 for SIGTERM).
constexpr int kFailedExitCode = 1;

int killed_exit_code() {
  const int signo = io::interrupt_signal();
  return 128 + (signo != 0 ? signo : SIGINT);
}

uint32_t chunk_crc(uint8_t type, const char* data, std::size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  crc = ::crc32(crc, &type, 1);
  crc = ::crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size));
  return static_cast<uint32_t>(crc);
}

std::string file_header() {
  std::string out(kIdent, 4);
  put_le(out, kMagic, 2);
  out.push_back(static_cast<char>(kVersion));
  return out;
}

// `data` framed as chunks from byte `offset` of the log on: padding where a block has no room
// for a chunk header, a FULL chunk where it fits, else FIRST, MIDDLE..., LAST.
std::string frame(const std::string& data, int64_t offset) {
  std::string out;
  std::size_t used = 0;
  bool first = true;
  do {
    int64_t left_in_block = kBlockSize - offset % kBlockSize;
    if (left_in_block < kRecordHeaderSize) {
      out.append(static_cast<std::size_t>(left_in_block), '\0');
      offset += left_in_block;
      left_in_block = kBlockSize;
    }
    const std::size_t room = static_cast<std::size_t>(left_in_block - kRecordHeaderSize);
    const std::size_t n = std::min(room, data.size() - used);
    const bool last = used + n == data.size();
    const uint8_t type = first && last ? kFull : first ? kFirst : last ? kLast : kMiddle;
    put_le(out, chunk_crc(type, data.data() + used, n), 4);
    put_le(out, n, 2);
    out.push_back(static_cast<char>(type));
    out.append(data, used, n);
    offset += kRecordHeaderSize + static_cast<int64_t>(n);
    used += n;
    first = false;
  } while (used < data.size());
  return out;
}

struct ScannedRecord {
  std::string data;
  int64_t end = 0;  ///< the byte after its last chunk
};

std::vector<ScannedRecord> scan(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  OML_CHECK(in, DataError, "cannot open the W&B run file '", path.string(), "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OML_CHECK(bytes.size() >= kFileHeaderSize && bytes.compare(0, kFileHeaderSize, file_header()) == 0,
            DataError, path.string(), ": not a W&B run file (no ':W&B' header of version 0)");
  std::vector<ScannedRecord> records;
  std::string pending;
  bool in_record = false;
  std::size_t at = kFileHeaderSize;
  while (at < bytes.size()) {
    const std::size_t left_in_block = kBlockSize - at % kBlockSize;
    if (left_in_block < kRecordHeaderSize) {
      at += left_in_block;  // the block's zero padding
      continue;
    }
    if (at + kRecordHeaderSize > bytes.size()) break;  // torn by a crash: keep what is whole
    const auto crc = static_cast<uint32_t>(get_le(bytes, at, 4));
    const auto size = static_cast<std::size_t>(get_le(bytes, at + 4, 2));
    const auto type = static_cast<uint8_t>(bytes[at + 6]);
    if (at + kRecordHeaderSize + size > bytes.size()) break;
    const char* data = bytes.data() + at + kRecordHeaderSize;
    OML_CHECK(crc == chunk_crc(type, data, size), DataError, path.string(),
              ": the checksum of the chunk at byte ", at, " does not match (a damaged file)");
    OML_CHECK(type >= kFull && type <= kLast && (type == kFull || type == kFirst) != in_record, DataError,
              path.string(), ": chunk of type ", static_cast<int>(type), " at byte ", at, " out of order");
    at += kRecordHeaderSize + size;
    if (type == kFull || type == kFirst) pending.clear();
    pending.append(data, size);
    in_record = type == kFirst || type == kMiddle;
    if (!in_record) records.push_back({pending, static_cast<int64_t>(at)});
  }
  return records;
}

std::string random_id() { return detail::random_token(8, "abcdefghijklmnopqrstuvwxyz0123456789"); }

std::string local_stamp(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y%m%d_%H%M%S", &tm);
  return buffer;
}

// W&B reads values as JSON with Python's extensions for the non-finite floats.
std::string value_json(const nlohmann::json& value) {
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  }
  return value.dump();
}

// OML logs the config to W&B flattened with "|" (oml.lightning.pipelines.logging).
void flatten(const nlohmann::json& value, const std::string& path, wandb::ConfigRecord& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& item : value.items())
      flatten(item.value(), path.empty() ? item.key() : path + "|" + item.key(), out);
    return;
  }
  auto* item = out.add_update();
  item->set_key(path);
  item->set_value_json(value_json(value));
}

std::string media_name(const std::string& tag, int64_t step) {
  std::string name = tag;
  std::replace_if(
      name.begin(), name.end(),
      [](char c) { return !(std::isalnum(static_cast<unsigned char>(c)) || c == '-'); }, '_');
  return name + "_" + std::to_string(step) + ".png";
}

}  // namespace

WandbOfflineRun::WandbOfflineRun(WandbOptions options, const LoggerContext& context,
                                 const nlohmann::json& config)
    : options_(std::move(options)), start_time_s_(unix_time_s()) {
  const fs::path root =
      (options_.save_dir.empty() ? context.run_dir : context.run_dir / options_.save_dir) / "wandb";
  if (context.resumed_run_id && !context.resumed_run_id->empty()) {
    id_ = *context.resumed_run_id;
    // The offline run this run's earlier process wrote (the newest, if it was resumed before).
    std::vector<fs::path> earlier;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      const std::string name = entry.path().filename().string();
      const std::string suffix = "-" + id_;
      if (name.rfind("offline-run-", 0) == 0 && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          fs::exists(entry.path() / ("run-" + id_ + ".wandb")))
        earlier.push_back(entry.path());
    }
    if (!earlier.empty()) {
      const fs::path dir = *std::max_element(earlier.begin(), earlier.end());
      try {
        reopen(dir, context.resumed_at_step.value_or(0));
        return;
      } catch (const DataError& e) {
        // A damaged file (a crash before its first record was whole) must not stop the resume.
        log::warn(std::string("wandb: cannot continue ") + dir.string() + " (" + e.what() +
                  "); a new offline run with the same id is written");
        out_.close();
        record_number_ = 0;
        summary_ = nlohmann::json::object();
      }
    }
    if (earlier.empty())
      log::warn("wandb: the offline run " + id_ + " this run continues is not under " + root.string() +
                "; a new offline run with that id is written (wandb sync resumes the run from it)");
  } else {
    id_ = options_.id.empty() ? random_id() : options_.id;
  }
  dir_ = root / ("offline-run-" + local_stamp(start_time_s_) + "-" + id_);
  open_new(context, config, context.resumed_run_id.has_value());
}

WandbOfflineRun::~WandbOfflineRun() = default;

void WandbOfflineRun::open_new(const LoggerContext& context, const nlohmann::json& config, bool resumed) {
  fs::create_directories(dir_ / "files");
  log_path_ = dir_ / ("run-" + id_ + ".wandb");
  out_.open(log_path_, std::ios::binary | std::ios::app);
  OML_CHECK(out_, RuntimeError, "cannot create the W&B run file '", log_path_.string(), "'");
  out_ << file_header();
  offset_ = kFileHeaderSize;

  wandb::Record header;
  header.mutable_header()->mutable_version_info()->set_producer(std::string("oml-cpp ") + OML_VERSION_STRING);
  header.mutable_header()->mutable_version_info()->set_min_consumer(kMinConsumer);
  append(header);

  wandb::Record record;
  auto* run = record.mutable_run();
  run->set_run_id(id_);
  run->set_entity(options_.entity);
  run->set_project(options_.project);
  run->set_display_name(options_.name.empty() ? context.run_name : options_.name);
  run->set_notes(options_.notes);
  run->set_run_group(options_.group);
  run->set_job_type(options_.job_type);
  run->set_host(host_name());
  // OML's tags: the config's, the postfix, the run folder's name; then the logger's own.
  std::vector<std::string> tags = context.tags;
  tags.push_back(context.run_name);
  tags.insert(tags.end(), options_.tags.begin(), options_.tags.end());
  for (const auto& tag : tags)
    if (!tag.empty()) run->add_tags(tag);
  run->mutable_start_time()->set_seconds(static_cast<int64_t>(start_time_s_));
  run->mutable_start_time()->set_nanos(
      static_cast<int32_t>((start_time_s_ - std::floor(start_time_s_)) * 1e9));
  if (resumed) {
    run->set_resumed(true);
    run->set_starting_step(context.resumed_at_step.value_or(0) + 1);
  }
  nlohmann::json logged = config;
  if (logged.is_object()) logged["dir"] = context.run_name;  // as OML adds its working folder
  flatten(logged, "", *run->mutable_config());
  append(record);
  out_.flush();
  log::info("wandb: offline run " + id_ + " in " + dir_.string() + "; upload it with `wandb sync " +
            dir_.string() + "`");
}

void WandbOfflineRun::reopen(const fs::path& dir, int64_t resumed_at_step) {
  dir_ = dir;
  log_path_ = dir_ / ("run-" + id_ + ".wandb");
  // Keep the records up to the last history row at or before the checkpoint's step; what the
  // killed process wrote after it (rows trained again now, its summary and exit) is cut.
  const std::vector<ScannedRecord> records = scan(log_path_);
  int64_t keep_end = kFileHeaderSize;
  int64_t kept = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    wandb::Record record;
    OML_CHECK(record.ParseFromString(records[i].data), DataError, log_path_.string(), ": record ", i + 1,
              " is not a W&B record");
    if (record.has_history() && record.history().step().num() > resumed_at_step) break;
    if (record.has_exit() || record.has_final()) break;
    if (record.has_summary()) continue;  // kept only when a kept row follows it
    keep_end = records[i].end;
    kept = static_cast<int64_t>(i) + 1;
    record_number_ = record.num();
  }
  OML_CHECK(kept > 0, DataError, log_path_.string(), ": no run record to continue (a damaged file)");
  fs::resize_file(log_path_, static_cast<uintmax_t>(keep_end));
  offset_ = keep_end;
  out_.open(log_path_, std::ios::binary | std::ios::app);
  OML_CHECK(out_, RuntimeError, "cannot append to the W&B run file '", log_path_.string(), "'");
  // _runtime goes on from the last kept row's, as one run's clock.
  for (int64_t i = kept - 1; i >= 0; --i) {
    wandb::Record record;
    record.ParseFromString(records[static_cast<std::size_t>(i)].data);
    if (!record.has_history()) continue;
    for (const auto& item : record.history().item()) {
      const std::string key = item.nested_key_size() > 0 ? item.nested_key(0) : item.key();
      if (key == "_runtime") start_time_s_ -= std::strtod(item.value_json().c_str(), nullptr);
    }
    break;
  }
  // The summary the killed process would have written: the last kept row's values.
  for (int64_t i = kept - 1; i >= 0; --i) {
    wandb::Record record;
    record.ParseFromString(records[static_cast<std::size_t>(i)].data);
    if (!record.has_history()) continue;
    for (const auto& item : record.history().item()) {
      const std::string key = item.nested_key_size() > 0 ? item.nested_key(0) : item.key();
      if (key.empty() || key[0] == '_' || summary_.contains(key)) continue;
      const auto value = nlohmann::json::parse(item.value_json(), nullptr, /*allow_exceptions=*/false);
      if (!value.is_discarded()) summary_[key] = value;
    }
  }
  log::info("wandb: continuing offline run " + id_ + " in " + dir_.string() + " after step " +
            std::to_string(resumed_at_step));
}

void WandbOfflineRun::append(wandb::Record& record) {
  record.set_num(++record_number_);
  record.mutable_info()->set_stream_id(id_);
  const std::string framed = frame(record.SerializeAsString(), offset_);
  out_.write(framed.data(), static_cast<std::streamsize>(framed.size()));
  OML_CHECK(out_, RuntimeError, "cannot write the W&B run file '", log_path_.string(), "'");
  offset_ += static_cast<int64_t>(framed.size());
}

std::string WandbOfflineRun::key(const std::string& tag) const {
  return options_.prefix.empty() ? tag : options_.prefix + "-" + tag;
}

double WandbOfflineRun::runtime_s() const { return unix_time_s() - start_time_s_; }

void WandbOfflineRun::log_scalar(const std::string& tag, double value, int64_t step) {
  if (finished_) return;
  if (row_step_ && *row_step_ != step) write_row();
  row_step_ = step;
  row_[key(tag)] = value;
}

void WandbOfflineRun::log_image(const std::string& tag, const EncodedImage& image, int64_t step) {
  if (finished_) return;
  if (row_step_ && *row_step_ != step) write_row();
  row_step_ = step;
  const std::string path = "media/images/" + media_name(tag, step);
  const fs::path file = dir_ / "files" / path;
  fs::create_directories(file.parent_path());
  {
    std::ofstream png(file, std::ios::binary | std::ios::trunc);
    png.write(image.png.data(), static_cast<std::streamsize>(image.png.size()));
    OML_CHECK(png, RuntimeError, "cannot write the W&B media file '", file.string(), "'");
  }
  announce_file(path, /*media=*/true);
  // W&B's reference to an image file (wandb.Image's JSON form).
  row_[key(tag)] = {{"_type", "image-file"}, {"format", "png"},        {"path", path},
                    {"width", image.width},  {"height", image.height}, {"size", image.png.size()}};
}

void WandbOfflineRun::log_file(const fs::path& file, const std::string& name) {
  if (finished_) return;
  const bool checkpoint = name.rfind("checkpoints/", 0) == 0;
  if (checkpoint && !options_.log_model) return;
  const std::string path = "oml/" + name;
  detail::link_or_copy(file, dir_ / "files" / path);
  announce_file(path, /*media=*/false);
}

void WandbOfflineRun::announce_file(const std::string& path, bool media) {
  if (!announced_files_.insert(path).second) return;
  wandb::Record record;
  auto* item = record.mutable_files()->add_files();
  item->set_path(path);
  // Media are final when written; the others (report.html, checkpoints) are uploaded as they are
  // at the end.
  item->set_policy(media ? wandb::FilesItem::NOW : wandb::FilesItem::END);
  item->set_type(media ? wandb::FilesItem::MEDIA : wandb::FilesItem::OTHER);
  append(record);
}

void WandbOfflineRun::write_row() {
  if (!row_step_) return;
  const double now = unix_time_s();
  // Lightning's WandbLogger logs the step as trainer/global_step too: OML users' charts use it.
  row_["trainer/global_step"] = *row_step_;
  wandb::Record record;
  auto* history = record.mutable_history();
  history->mutable_step()->set_num(*row_step_);
  const auto add = [&](const std::string& k, const std::string& json) {
    auto* item = history->add_item();
    item->add_nested_key(k);
    item->set_value_json(json);
  };
  for (const auto& item : row_.items()) {
    add(item.key(), value_json(item.value()));
    summary_[item.key()] = item.value();
  }
  add("_step", std::to_string(*row_step_));
  add("_runtime", value_json(now - start_time_s_));
  add("_timestamp", value_json(now));
  append(record);
  out_.flush();  // a row is whole on disk once its step is over, whatever ends the process later
  summary_["_step"] = *row_step_;
  row_ = nlohmann::json::object();
  row_step_.reset();
}

void WandbOfflineRun::write_summary() {
  if (summary_.empty()) return;
  wandb::Record record;
  for (const auto& item : summary_.items()) {
    auto* update = record.mutable_summary()->add_update();
    update->add_nested_key(item.key());
    update->set_value_json(value_json(item.value()));
  }
  auto* runtime = record.mutable_summary()->add_update();
  runtime->set_key("_runtime");
  runtime->set_value_json(value_json(runtime_s()));
  append(record);
}

void WandbOfflineRun::flush() {
  if (finished_) return;
  write_row();
  write_summary();
  out_.flush();
  OML_CHECK(out_, RuntimeError, "cannot write the W&B run file '", log_path_.string(), "'");
}

void WandbOfflineRun::finish(RunStatus status) {
  if (finished_) return;
  write_row();
  write_summary();
  wandb::Record exit;
  exit.mutable_control()->set_always_send(true);
  exit.mutable_exit()->set_exit_code(status == RunStatus::finished ? 0
                                     : status == RunStatus::failed ? kFailedExitCode
                                                                   : killed_exit_code());
  exit.mutable_exit()->set_runtime(static_cast<int32_t>(runtime_s()));
  append(exit);
  wandb::Record final_record;
  final_record.mutable_final();
  append(final_record);
  out_.flush();
  finished_ = true;
  OML_CHECK(out_, RuntimeError, "cannot write the W&B run file '", log_path_.string(), "'");
  log::info("wandb: offline run " + id_ + " " +
            (status == RunStatus::finished ? "finished" : "ended " + run_status_name(status)) +
            "; upload it with `wandb sync " + dir_.string() + "`");
}

std::vector<std::string> read_wandb_records(const fs::path& path) {
  std::vector<std::string> out;
  for (auto& record : scan(path)) out.push_back(std::move(record.data));
  return out;
}

}  // namespace oml::report
