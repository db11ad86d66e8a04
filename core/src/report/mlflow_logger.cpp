#include "oml/report/mlflow_logger.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "mlflow_store.h"
#include "offline_files.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"

namespace oml::report {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kComponent = "logger 'mlflow'";
// Values waiting for the server, at most: past it new metric values are dropped (train.jsonl and
// metrics.jsonl keep them all); params, tags, files and the status are always kept.
constexpr std::size_t kMaxPendingValues = 100000;
// The first contact's outcome is awaited this long at start (so that the first checkpoint knows
// the run id); a server that does not accept a connection in 3 s counts as unreachable.
constexpr auto kStartWait = std::chrono::seconds(4);
// finish() waits this long for the queue to empty; while the server keeps taking values
// (FINISHED / FAILED: say the checkpoints of log_model: true) it waits on, up to kFinishCap.
constexpr auto kFinishWait = std::chrono::seconds(5);
constexpr auto kFinishCap = std::chrono::seconds(120);
// Retries after a failure wait 0.25 s, doubling up to 8 s.
constexpr auto kFirstBackoff = std::chrono::milliseconds(250);
constexpr auto kMaxBackoff = std::chrono::milliseconds(8000);
// How long a few metric values wait for more before they are sent.
constexpr auto kLinger = std::chrono::milliseconds(1000);
// A run whose every request is refused (4xx) this many times in a row is given up.
constexpr int kMaxRefusals = 20;
// pending.jsonl starts again once nothing waits and it has this many lines.
constexpr std::size_t kSpoolLinesToCompact = 20000;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string user_name() {
  for (const char* name : {"USER", "LOGNAME"}) {
    if (!env(name).empty()) return env(name);
  }
  if (const passwd* entry = ::getpwuid(::getuid())) return entry->pw_name;
  return "unknown";
}

// Lightning's MLFlowLogger keeps only these characters of a metric key (MLflow refuses others);
// a path MLflow would normalise ("a//b", "a/") is cleaned as well.
std::string mlflow_key(const std::string& key) {
  static const std::regex bad("[^a-zA-Z0-9_/. -]+");
  std::string out = std::regex_replace(key, bad, "");
  std::string cleaned;
  for (const auto& part : split(out, '/')) {
    if (part.empty() || part == "." || part == "..") continue;
    cleaned += (cleaned.empty() ? "" : "/") + part;
  }
  return cleaned.empty() ? "_" : cleaned;
}

json number_json(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

double json_number(const json& value) {
  if (value.is_number()) return value.get<double>();
  const std::string text = value.get<std::string>();
  return std::stod(text);  // "nan", "inf", "-inf"
}

}  // namespace

MlflowOptions read_mlflow_options(config::ArgsReader& r) {
  MlflowOptions o;
  std::string experiment, uri, run_id;
  r.optional("experiment_name", experiment).optional("run_name", o.run_name).optional("tracking_uri", uri);
  r.optional("tags", o.tags).optional("save_dir", o.save_dir).optional("prefix", o.prefix);
  r.optional("artifact_location", o.artifact_location).optional("run_id", run_id);
  r.custom([&] {
    const config::Node node = r.take("log_model");
    if (node.is_null()) return;
    if (node.is_scalar() && node.as<std::string>() == "all") {
      o.log_model = MlflowOptions::LogModel::all;
    } else {
      o.log_model = node.as<bool>() ? MlflowOptions::LogModel::at_end : MlflowOptions::LogModel::no;
    }
  });
  const bool uri_from_env = uri.empty() && !env("MLFLOW_TRACKING_URI").empty();
  if (uri.empty()) uri = env("MLFLOW_TRACKING_URI");
  if (uri.empty()) uri = "file:" + o.save_dir;
  o.tracking_uri = uri;
  if (experiment.empty()) experiment = env("MLFLOW_EXPERIMENT_NAME");
  if (!experiment.empty()) o.experiment_name = experiment;
  o.run_id = run_id.empty() ? env("MLFLOW_RUN_ID") : run_id;
  r.check([&] {
    const bool http = starts_with(uri, "http://") || starts_with(uri, "https://");
    const std::string given =
        uri_from_env ? "MLFLOW_TRACKING_URI=" + uri + " (tracking_uri is not set)" : "'" + uri + "'";
    config::check_argument(
        http || mlflow::is_local(uri), kComponent, "tracking_uri", "tracking URI ", given,
        " is not one oml-cpp writes: use an MLflow tracking server, http(s)://host:port (a database or ",
        "databricks store is served by `mlflow server --backend-store-uri ...`), or a local folder, ",
        "file:./ml-runs or a path");
    config::check_argument(!o.experiment_name.empty(), kComponent, "experiment_name", "must not be empty");
    // MLflow refuses these keys (Lightning's logger fails at create_run); its file store keeps a
    // tag as a file of that name, so "../x" would be a file outside the run.
    for (const auto& tag : o.tags) {
      config::check_argument(
          mlflow::is_valid_key(tag.first), kComponent, "tags", "tag key '", tag.first,
          "' is not one MLflow accepts: at most 250 bytes of letters, digits, '_', '-', '.', ' ', ':' ",
          "and '/' between names, none of them empty, '.' or '..'");
    }
  });
  return o;
}

// One thing to send, in the order logged.
struct Op {
  enum Kind { metric, param, tag, artifact, status };
  Kind kind = metric;
  uint64_t seq = 0;
  std::string key;   ///< metric/param/tag key, artifact path, status name
  std::string text;  ///< param/tag value; artifact: the snapshot file, relative to the run directory
  double value = 0;
  int64_t step = 0;
  int64_t time = 0;   ///< metric timestamp / end time (ms)
  bool fresh = true;  ///< logged by this process (not restored from pending.jsonl)
};

namespace {

const char* kind_name(Op::Kind kind) {
  static const char* names[] = {"metric", "param", "tag", "artifact", "status"};
  return names[kind];
}

json op_json(const Op& op) {
  json line{{"seq", op.seq}, {"op", kind_name(op.kind)}, {"key", op.key}};
  if (op.kind == Op::metric) {
    line["value"] = number_json(op.value);
    line["step"] = op.step;
    line["time"] = op.time;
  } else if (op.kind == Op::status) {
    line["time"] = op.time;
  } else {
    line["text"] = op.text;
    if (op.kind == Op::artifact) line["step"] = op.step;
  }
  return line;
}

Op op_from(const json& line) {
  Op op;
  const std::string kind = line.at("op").get<std::string>();
  for (int k = Op::metric; k <= Op::status; ++k) {
    if (kind == kind_name(static_cast<Op::Kind>(k))) op.kind = static_cast<Op::Kind>(k);
  }
  op.seq = line.at("seq").get<uint64_t>();
  op.key = line.at("key").get<std::string>();
  op.text = line.value("text", "");
  if (line.contains("value")) op.value = json_number(line["value"]);
  op.step = line.value("step", int64_t{0});
  op.time = line.value("time", int64_t{0});
  op.fresh = false;
  return op;
}

std::string run_line(const mlflow::RunInfo& run) {
  return json{{"run", {{"run_id", run.run_id}, {"experiment_id", run.experiment_id}}}}.dump();
}

}  // namespace

class MlflowLogger::Impl {
 public:
  Impl(MlflowOptions options, const LoggerContext& context)
      : options_(std::move(options)),
        run_dir_(context.run_dir),
        run_name_(options_.run_name.empty() ? context.run_name : options_.run_name),
        resumed_at_step_(context.resumed_at_step),
        folder_(context.run_dir / "mlflow"),
        spool_path_(folder_ / "pending.jsonl") {
    fs::create_directories(folder_ / "files");
    // What the run to log into is: the checkpoint's, then the one a killed process of this run
    // directory had started (pending.jsonl), then the configured run_id.
    std::string continued = context.resumed_run_id.value_or("");
    std::deque<Op> restored = restore_spool(continued);
    if (continued.empty()) continued = options_.run_id;
    continue_id_ = continued;
    next_seq_ = restored.empty() ? 1 : restored.back().seq + 1;
    queue_ = std::move(restored);
    rewrite_spool();

    // OML's MLFlowPipelineLogger: the config as params ("/"-joined keys, plus "dir": the run
    // directory's name), the tags and the run directory's name as tags with the value "tag".
    const json config = config_as_json(context.config_yaml);
    auto params =
        config.is_object() ? flatten_config(config, "/") : std::vector<std::pair<std::string, std::string>>{};
    params.emplace_back("dir", context.run_name);
    for (auto& [key, value] : params) {
      if (value.size() > mlflow::kMaxParamValueLength) {
        log::warn("mlflow: param '" + key + "' is " + std::to_string(value.size()) +
                  " characters long; MLflow keeps " + std::to_string(mlflow::kMaxParamValueLength) +
                  ", the rest is cut off");
        value.resize(mlflow::kMaxParamValueLength);
      }
      push(make(Op::param, mlflow_key(key), value));
    }
    std::vector<std::string> oml_tags = context.tags;
    oml_tags.push_back(context.run_name);
    for (const auto& tag : oml_tags) {
      if (!tag.empty()) push(make(Op::tag, mlflow_key(tag), "tag"));
    }
    if (resumed_at_step_) push(make(Op::tag, "oml.resumed_at_step", std::to_string(*resumed_at_step_)));

    try {
      store_ = mlflow::open_store(options_.tracking_uri, run_dir_);
    } catch (const mlflow::StoreError& e) {
      log::warn(std::string("mlflow: ") + e.what() + "; nothing is logged to MLflow");
      const std::lock_guard<std::mutex> lock(mutex_);
      given_up_ = true;
      queue_.clear();
      return;
    }
    thread_ = std::thread([this] { send_loop(); });
    std::unique_lock<std::mutex> lock(mutex_);
    started_cv_.wait_for(lock, kStartWait, [&] { return first_contact_done_; });
  }

  ~Impl() { stop(); }

  void log_scalar(const std::string& tag, double value, int64_t step) {
    auto known = metric_keys_.find(tag);
    if (known == metric_keys_.end()) {  // once per tag: the regex is the slow part of a call
      const std::string key = options_.prefix.empty() ? tag : options_.prefix + "-" + tag;
      known = metric_keys_.emplace(tag, mlflow_key(key)).first;
      if (known->second != key) {
        log::warn("mlflow: metric '" + key + "' is logged as '" + known->second +
                  "' (MLflow takes letters, digits, '_', '-', '.', ' ' and '/' only)");
      }
    }
    Op op = make(Op::metric, known->second, "");
    op.value = value;
    op.step = step;
    op.time = detail::unix_time_ms();
    push(std::move(op));
  }

  void log_image(const std::string& tag, const EncodedImage& image, int64_t step) {
    const std::string path = "images/" + mlflow_key(tag) + "/step_" + std::to_string(step) + ".png";
    const uint64_t seq = reserve_seq();
    const fs::path snapshot = folder_ / "files" / (std::to_string(seq) + "-image.png");
    mlflow::replace_file(snapshot, image.png);
    Op op = make(Op::artifact, path, fs::relative(snapshot, run_dir_).string());
    op.seq = seq;
    op.step = step;
    push(std::move(op), false);
  }

  void log_file(const fs::path& file, const std::string& name) {
    if (starts_with(name, "checkpoints/")) {
      if (options_.log_model == MlflowOptions::LogModel::no) return;
      if (options_.log_model == MlflowOptions::LogModel::at_end) {
        checkpoints_[name] = file;
        return;
      }
    }
    push_file(file, name);
  }

  void flush() {
    const std::lock_guard<std::mutex> lock(mutex_);
    spool_.flush();
    cv_.notify_all();
  }

  void finish(RunStatus status) {
    if (status != RunStatus::killed) {
      for (const auto& [name, file] : checkpoints_) {
        if (fs::exists(file)) push_file(file, name);
      }
    }
    Op op = make(Op::status, run_status_name(status), "");
    op.time = detail::unix_time_ms();
    push(std::move(op));
    if (!thread_.joinable()) return;
    const auto start = Clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    finishing_ = true;
    cv_.notify_all();
    auto deadline = start + kFinishWait;
    uint64_t done = done_seq_;
    while (!queue_.empty() && !given_up_) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        if (done_seq_ == done || status == RunStatus::killed || Clock::now() - start >= kFinishCap) break;
        done = done_seq_;
        deadline = Clock::now() + kFinishWait;  // it is getting through: wait on
      }
    }
    const std::size_t left = queue_.size();
    lock.unlock();
    stop();
    if (left == 0 && !run_.run_id.empty()) {  // all sent: pending.jsonl keeps only the run's id
      spool_.close();
      mlflow::replace_file(spool_path_, run_line(run_) + "\n");
    }
    if (left > 0 && !given_up_) {
      log::warn("mlflow: " + std::to_string(left) + " values and files could not be sent to " +
                store_->where() + (last_error_.empty() ? "" : " (" + last_error_ + ")") +
                "; they are kept in " + spool_path_.string() +
                " and sent when this run is resumed (oml-train --resume)");
    }
    if (dropped_ > 0) {
      log::warn("mlflow: " + std::to_string(dropped_) + " metric values were dropped while more than " +
                std::to_string(kMaxPendingValues) +
                " waited for the server (train.jsonl and metrics.jsonl have them)");
    }
  }

  std::string run_id() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return run_.run_id.empty() ? continue_id_ : run_.run_id;
  }

 private:
  Op make(Op::Kind kind, std::string key, std::string text) const {
    Op op;
    op.kind = kind;
    op.key = std::move(key);
    op.text = std::move(text);
    return op;
  }

  uint64_t reserve_seq() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return next_seq_++;
  }

  // A copy of `file` as it is now (a hard link: checkpoints and report.html are replaced by a
  // rename, never rewritten in place), sent later as `name`.
  void push_file(const fs::path& file, const std::string& name) {
    const uint64_t seq = reserve_seq();
    const fs::path snapshot = folder_ / "files" / (std::to_string(seq) + "-" + file.filename().string());
    std::error_code error;
    fs::create_hard_link(file, snapshot, error);
    if (error) fs::copy_file(file, snapshot, fs::copy_options::overwrite_existing);
    Op op = make(Op::artifact, name, fs::relative(snapshot, run_dir_).string());
    op.seq = seq;
    push(std::move(op), false);
  }

  void push(Op op, bool number = true) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_ || given_up_) return;
    if (op.kind == Op::metric && queue_.size() >= kMaxPendingValues) {
      if (dropped_++ == 0) {
        log::warn("mlflow: " + std::to_string(kMaxPendingValues) + " values wait for " +
                  options_.tracking_uri +
                  "; new metric values are dropped until it takes them (train.jsonl and metrics.jsonl have "
                  "them all)");
      }
      return;
    }
    if (number) op.seq = next_seq_++;
    spool_ << op_json(op).dump() << '\n';
    spool_.flush();  // a killed process leaves every value it logged (a write, no fsync)
    ++spool_lines_;
    queue_.push_back(std::move(op));
    cv_.notify_all();
  }

  // The values a killed process of this run directory had not sent (pending.jsonl), without what
  // it logged after the checkpoint this run resumes from; its run id when it had one.
  std::deque<Op> restore_spool(std::string& run_id) {
    std::deque<Op> ops;
    if (!resumed_at_step_ || !fs::exists(spool_path_)) return ops;
    std::ifstream in(spool_path_);
    std::string line;
    uint64_t sent = 0;
    std::string spool_run;
    std::vector<Op> all;
    while (std::getline(in, line)) {
      const json parsed = json::parse(line, nullptr, false);
      if (!parsed.is_object()) continue;  // a line cut off by the kill
      try {
        if (parsed.contains("run")) spool_run = parsed["run"].value("run_id", "");
        if (parsed.contains("sent")) sent = std::max(sent, parsed["sent"].get<uint64_t>());
        if (parsed.contains("op")) all.push_back(op_from(parsed));
      } catch (const json::exception&) {
      }
    }
    if (run_id.empty()) run_id = spool_run;
    for (auto& op : all) {
      const bool after_checkpoint = (op.kind == Op::metric || op.kind == Op::artifact) &&
                                    op.step > *resumed_at_step_ && !(op.kind == Op::artifact && op.step == 0);
      // Params are the config of the process that starts the MLflow run; a status is its end.
      if (op.seq <= sent || after_checkpoint || op.kind == Op::param || op.kind == Op::status) {
        if (op.kind == Op::artifact && op.seq > sent) fs::remove(run_dir_ / op.text);
        continue;
      }
      if (op.kind == Op::artifact && !fs::exists(run_dir_ / op.text)) continue;
      ops.push_back(std::move(op));
    }
    std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.seq < b.seq; });
    return ops;
  }

  // pending.jsonl as the queue is now (the run's id first when known), then appended to.
  void rewrite_spool() {
    if (spool_.is_open()) spool_.close();
    std::string text;
    for (const auto& op : queue_) text += op_json(op).dump() + "\n";
    mlflow::replace_file(spool_path_, text);
    spool_.open(spool_path_, std::ios::app);
    spool_lines_ = queue_.size();
  }

  void stop() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
      spool_.flush();
    }
    if (store_) store_->cancel();
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // --- the sending thread -------------------------------------------------------------------

  void send_loop() {
    auto backoff = kFirstBackoff;
    int refusals = 0;
    std::size_t limit = mlflow::kMaxEntitiesPerBatch;
    while (true) {
      std::vector<Op> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (run_.run_id.empty() && !stopped_) {
          // fall through: start the run first
        } else {
          cv_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
          // A few values (one step's) wait up to kLinger for the next ones: one request a second
          // while training streams, not one per step (a tracking server on the same cores costs
          // CPU per request). Files, params, a status and a finishing run go at once.
          cv_.wait_for(lock, kLinger, [&] {
            return stopped_ || finishing_ || queue_.size() >= mlflow::kMaxMetricsPerBatch ||
                   queue_.front().kind != Op::metric;
          });
          if (stopped_) return;
          batch = take_batch(limit);
        }
      }
      try {
        if (run_.run_id.empty()) {
          start_run();
        } else {
          send(batch);
          complete(batch);
        }
        if (failures_ >= 3) log::info("mlflow: " + store_->where() + " answers again; sending what waited");
        failures_ = 0;
        backoff = kFirstBackoff;
        refusals = 0;
        limit = mlflow::kMaxEntitiesPerBatch;
      } catch (const mlflow::StoreError& e) {
        {
          const std::lock_guard<std::mutex> lock(mutex_);
          if (stopped_) return;
          last_error_ = e.what();
        }
        if (e.transient) {
          note_failure(e.what());
          if (!wait_for(backoff)) return;
          backoff = std::min(backoff * 2, kMaxBackoff);
          continue;
        }
        if (run_.run_id.empty()) {  // the run cannot be started at all (a deleted experiment, ...)
          give_up(std::string("cannot start the run at ") + store_->where() + ": " + e.what());
          return;
        }
        // A request refused as such: send its halves alone, until the one value at fault is dropped.
        if (batch.size() > 1) {
          limit = std::max<std::size_t>(1, batch.size() / 2);
        } else {
          log::warn(std::string("mlflow: ") + store_->where() + " refuses " + kind_name(batch[0].kind) +
                    " '" + batch[0].key + "': " + e.what() + "; it is dropped");
          complete(batch);
        }
        if (++refusals >= kMaxRefusals) {
          give_up(store_->where() + " refuses everything sent to run " + run_.run_id + " (last: " + e.what() +
                  ")");
          return;
        }
      } catch (const std::exception& e) {  // a bug or a broken reply: never the end of training
        give_up(std::string("stopped sending to ") + store_->where() + ": " + e.what());
        return;
      }
    }
  }

  // Continues the run to continue, or starts a new one; the first contact's outcome is announced.
  void start_run() {
    mlflow::RunInfo run;
    bool continued = false;
    try {
      if (!continue_id_.empty()) {
        if (auto found = store_->get_run(continue_id_)) {
          run = *found;
          continued = true;
          store_->update_run(run.run_id, "RUNNING", 0);
        } else {
          log::warn("mlflow: run " + continue_id_ + " is not at " + store_->where() +
                    "; a new run is started");
        }
      }
      if (!continued) {
        const std::string experiment =
            store_->experiment_id(options_.experiment_name, options_.artifact_location);
        mlflow::KeyValues tags(options_.tags.begin(), options_.tags.end());
        tags.emplace_back("mlflow.user", user_name());
        tags.emplace_back("mlflow.source.name", "oml-cpp");
        tags.emplace_back("mlflow.source.type", "LOCAL");
        run = store_->create_run(experiment, run_name_, detail::unix_time_ms(), tags, user_name());
      }
    } catch (const mlflow::StoreError& e) {
      announce_first_contact();
      throw;
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      run_ = run;
      continued_ = continued;
      spool_ << run_line(run) << '\n';
      spool_.flush();
      ++spool_lines_;
    }
    log::info("mlflow: " + std::string(continued ? "continuing" : "started") + " run " + run.run_id + " (" +
              run_name_ + ") in experiment " + run.experiment_id + " at " + store_->where());
    announce_first_contact();
  }

  void announce_first_contact() {
    const std::lock_guard<std::mutex> lock(mutex_);
    first_contact_done_ = true;
    started_cv_.notify_all();
  }

  // The next request's ops from the front of the queue (called with mutex_ held): one file, one
  // status, params alone, or metrics and tags, within MLflow's limits and `limit`.
  std::vector<Op> take_batch(std::size_t limit) {
    std::vector<Op> batch;
    const Op::Kind first = queue_.front().kind;
    if (first == Op::artifact || first == Op::status) return {queue_.front()};
    std::size_t metrics = 0, tags = 0, bytes = 0;
    for (const auto& op : queue_) {
      if (batch.size() >= limit) break;
      if (first == Op::param ? op.kind != Op::param : (op.kind != Op::metric && op.kind != Op::tag)) break;
      const std::size_t size = op.key.size() + op.text.size() + 64;
      if (bytes + size > mlflow::kMaxBatchBytes * 9 / 10) break;
      if (op.kind == Op::metric && ++metrics > mlflow::kMaxMetricsPerBatch) break;
      if (op.kind != Op::metric && ++tags > mlflow::kMaxParamsTagsPerBatch) break;
      bytes += size;
      batch.push_back(op);
    }
    return batch;
  }

  void send(const std::vector<Op>& ops) {
    const Op& first = ops.front();
    if (first.kind == Op::artifact) {
      const fs::path file = run_dir_ / first.text;
      if (fs::exists(file)) store_->log_artifact(run_, file, first.key);
      return;
    }
    if (first.kind == Op::status) {
      store_->update_run(run_.run_id, first.key, first.time);
      return;
    }
    mlflow::Batch batch;
    for (const auto& op : ops) {
      if (op.kind == Op::metric) batch.metrics.push_back({op.key, op.value, op.time, op.step});
      if (op.kind == Op::tag) batch.tags.emplace_back(op.key, op.text);
      // A continued run has its params from the process that started it (MLflow refuses changes).
      if (op.kind == Op::param && !continued_) batch.params.emplace_back(op.key, op.text);
    }
    if (!batch.empty()) store_->log_batch(run_.run_id, batch);
  }

  // `ops` (the queue's front) are done: popped, their files removed, pending.jsonl told.
  void complete(const std::vector<Op>& ops) {
    for (const auto& op : ops) {
      if (op.kind == Op::artifact) {
        std::error_code error;
        fs::remove(run_dir_ / op.text, error);
      }
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < ops.size() && !queue_.empty(); ++i) queue_.pop_front();
    done_seq_ = ops.back().seq;
    if (queue_.empty() && spool_lines_ > kSpoolLinesToCompact) {
      // Nothing waits: the file starts again from the run's id (no fsync: it only saves a resend).
      spool_.close();
      spool_.open(spool_path_, std::ios::trunc);
      spool_ << run_line(run_) << '\n';
      spool_lines_ = 1;
    } else {
      spool_ << json{{"sent", done_seq_}}.dump() << '\n';
      ++spool_lines_;
    }
    spool_.flush();
    cv_.notify_all();
  }

  // One warning per kind of failure (unreachable, each HTTP status), then quiet retries.
  void note_failure(const std::string& error) {
    announce_first_contact();
    const std::string kind = error.find("answered HTTP") != std::string::npos
                                 ? error.substr(error.find("answered HTTP"), 17)
                                 : std::string("unreachable");
    ++failures_;
    if (warned_.insert(kind).second) {
      log::warn("mlflow: " + store_->where() + (kind == "unreachable" ? " cannot be reached: " : ": ") +
                error + "; what is logged waits in " + spool_path_.string() +
                " and is sent when the server takes it (training goes on)");
    } else {
      log::debug("mlflow: " + error + " (retrying)");
    }
  }

  // Waits `delay` unless stopped; false when stopped.
  bool wait_for(std::chrono::milliseconds delay) {
    std::unique_lock<std::mutex> lock(mutex_);
    return !cv_.wait_for(lock, delay, [&] { return stopped_; });
  }

  void give_up(const std::string& why) {
    log::warn("mlflow: " + why + "; nothing more is sent to MLflow (training goes on)");
    announce_first_contact();
    const std::lock_guard<std::mutex> lock(mutex_);
    given_up_ = true;
    cv_.notify_all();
  }

  MlflowOptions options_;
  fs::path run_dir_;
  std::string run_name_;
  std::optional<int64_t> resumed_at_step_;
  fs::path folder_;
  fs::path spool_path_;
  std::map<std::string, fs::path> checkpoints_;     ///< log_model: true: the latest of each, sent at the end
  std::map<std::string, std::string> metric_keys_;  ///< tag -> MLflow key

  std::unique_ptr<mlflow::Store> store_;
  std::thread thread_;
  mutable std::mutex mutex_;  ///< guards everything below
  std::condition_variable cv_;
  std::condition_variable started_cv_;
  std::deque<Op> queue_;
  std::ofstream spool_;
  std::size_t spool_lines_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t done_seq_ = 0;
  std::string continue_id_;
  mlflow::RunInfo run_;
  bool continued_ = false;
  bool first_contact_done_ = false;
  bool stopped_ = false;
  bool finishing_ = false;  ///< finish() waits: nothing lingers
  bool given_up_ = false;
  int failures_ = 0;  ///< transient failures in a row
  std::size_t dropped_ = 0;
  std::string last_error_;
  std::set<std::string> warned_;
};

MlflowLogger::MlflowLogger(MlflowOptions options, const LoggerContext& context)
    : impl_(std::make_unique<Impl>(std::move(options), context)) {}
MlflowLogger::~MlflowLogger() = default;
void MlflowLogger::log_scalar(const std::string& tag, double value, int64_t step) {
  impl_->log_scalar(tag, value, step);
}
void MlflowLogger::log_image(const std::string& tag, const EncodedImage& image, int64_t step) {
  impl_->log_image(tag, image, step);
}
void MlflowLogger::log_file(const fs::path& file, const std::string& name) { impl_->log_file(file, name); }
void MlflowLogger::flush() { impl_->flush(); }
void MlflowLogger::finish(RunStatus status) { impl_->finish(status); }
std::string MlflowLogger::run_id() const { return impl_->run_id(); }

}  // namespace oml::report
