#include "runtime/run_dir.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <ctime>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/io/atomic_file.h"
#include "oml/io/pending_files.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

std::string default_run_name(const std::string& postfix) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d_%H-%M-%S", &local);
  char name[64];
  std::snprintf(name, sizeof(name), "%s.%03d_%d", stamp, static_cast<int>(millis),
                static_cast<int>(::getpid()));
  return postfix.empty() ? std::string(name) : std::string(name) + "_" + postfix;
}

fs::path resumed_run_directory(const fs::path& checkpoint) {
  const fs::path file = fs::absolute(checkpoint).lexically_normal();
  const fs::path run = file.parent_path().parent_path();
  const std::string new_run_hint =
      "; to start a new run from its weights, give it as the model's `weights:` "
      "(e.g. --set extractor.args.weights=" +
      checkpoint.string() + ") and leave out --resume";
  if (file.parent_path().filename() != "checkpoints" || !fs::is_regular_file(run / "config.yaml")) {
    throw UsageError("--resume " + checkpoint.string() +
                     ": not a checkpoint of an oml-train run directory (<run>/checkpoints/last.ckpt "
                     "with <run>/config.yaml); --resume continues a run in its own directory" +
                     new_run_hint);
  }
  if (file.filename() != "last.ckpt") {
    throw UsageError("--resume " + checkpoint.string() + ": a run continues from its latest state, " +
                     (run / "checkpoints" / "last.ckpt").string() + "; " + file.filename().string() +
                     " is an earlier state, and resuming from it would roll the run back and overwrite "
                     "its newer checkpoints and logs" +
                     new_run_hint);
  }
  if (!fs::exists(file)) {
    throw UsageError("--resume " + checkpoint.string() + ": the run " + run.string() +
                     " has no last.ckpt: it stopped before its first checkpoint, so there is nothing "
                     "to continue; start it again under another run_name, or remove " +
                     run.string() + " (its files are the run's) to use its name again");
  }
  return run;
}

RunDir::RunDir(fs::path path) : path_(std::move(path)) {}

RunDir RunDir::create(const fs::path& logs_root, const std::string& run_name) {
  std::error_code ec;
  // "logs/" is the folder "logs" (its symlink_status would follow a link).
  fs::path root = logs_root;
  while (root.has_relative_path() && !root.has_filename()) root = root.parent_path();
  OML_CHECK(!fs::is_symlink(fs::symlink_status(root, ec)) || fs::exists(root, ec), ConfigError, "logs_root '",
            logs_root.string(), "' is a link to nothing; point it at a folder");
  fs::create_directories(logs_root, ec);
  if (ec) throw RuntimeError("cannot create logs_root '" + logs_root.string() + "': " + ec.message());
  RunDir dir(logs_root / run_name);
  // One mkdir both checks and claims: of two runs with the same name, exactly one gets it.
  if (!fs::create_directory(dir.path_, ec)) {
    if (ec && fs::is_symlink(fs::symlink_status(dir.path_)))
      throw ConfigError("the run directory '" + dir.path_.string() +
                        "' is a link to nothing; choose another run_name");
    if (ec)
      throw RuntimeError("cannot create the run directory '" + dir.path_.string() + "': " + ec.message());
    const fs::path last = dir.checkpoints() / "last.ckpt";
    if (!fs::exists(last, ec) && fs::is_regular_file(dir.path_ / "config.yaml", ec)) {
      throw ConfigError("the run directory '" + dir.path_.string() +
                        "' already exists, from a run that stopped before its first checkpoint (it has "
                        "no checkpoints/last.ckpt to continue); oml-train never removes a run's files: "
                        "remove that folder to use its name again, choose another run_name, or leave "
                        "run_name out for a new timestamped one");
    }
    throw ConfigError("the run directory '" + dir.path_.string() +
                      "' already exists (another run's files: its checkpoints and logs are never "
                      "overwritten); choose another run_name, leave run_name out for a new "
                      "timestamped one, or continue that run with --resume " +
                      last.string());
  }
  dir.lock();
  fs::create_directory(dir.checkpoints(), ec);
  if (ec) throw RuntimeError("cannot create '" + dir.checkpoints().string() + "': " + ec.message());
  return dir;
}

RunDir RunDir::reopen(const fs::path& run_directory) {
  RunDir dir(run_directory);
  dir.lock();
  return dir;
}

void RunDir::lock() {
  lock_ = io::LockFile::try_lock(path_ / ".lock", "oml-train");
  if (!lock_.held()) {
    throw UsageError("the run directory '" + path_.string() + "' is in use by another process" +
                     (lock_.holder().empty() ? std::string() : " (pid " + lock_.holder() + ")") +
                     "; two processes never write one run directory");
  }
  lock_.write_pid();
  // The hook runs on the cleanup's thread while this process still holds the lock, so the file
  // it removes is this run's.
  remove_lock_on_interrupt_ = std::make_unique<io::InterruptHook>([file = lock_.path()](int) {
    std::error_code ignored;
    fs::remove(file, ignored);
  });
}

RunDir::RunDir(RunDir&& other) noexcept = default;
RunDir& RunDir::operator=(RunDir&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    lock_ = std::move(other.lock_);
    remove_lock_on_interrupt_ = std::move(other.remove_lock_on_interrupt_);
  }
  return *this;
}

RunDir::~RunDir() { release(); }

void RunDir::release() {
  // The hook first: its destruction waits for a cleanup running it, so it never removes a file
  // another process locked after this one let go.
  remove_lock_on_interrupt_.reset();
  // Removed while still held, so no other process can be holding this file's lock.
  lock_.remove_and_release();
}

void RunDir::write_config(const std::string& resolved_yaml) const {
  io::write_file_atomic(path_ / "config.yaml", resolved_yaml);
}

std::string RunDir::write_resume_config(const std::string& resolved_yaml) const {
  int n = 1;
  while (fs::exists(path_ / ("config.resume-" + std::to_string(n) + ".yaml"))) ++n;
  io::write_file_atomic(path_ / ("config.resume-" + std::to_string(n) + ".yaml"), resolved_yaml);
  std::ifstream in(path_ / "config.yaml", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

namespace {

/// Scalars and sequences as flow-style text, mappings flattened into dotted keys.
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& item : node) {
      const std::string key = item.first.as<std::string>();
      flatten(item.second, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  YAML::Emitter text;
  text << YAML::Flow << node;
  out[prefix] = text.c_str();
}

std::map<std::string, std::string> flattened(const std::string& yaml) {
  std::map<std::string, std::string> out;
  try {
    flatten(YAML::Load(yaml), "", out);
  } catch (const YAML::Exception&) {
    // An unreadable config.yaml only costs the warnings.
  }
  return out;
}

/// Keeps the lines of a JSONL file whose "step" is at most `step`; a line that does not parse
/// (cut by a kill mid-write) is dropped too. Rewrites the file only when something goes.
void truncate_jsonl(const fs::path& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool keep = record.is_object() && record.contains("step") && record["step"].is_number_integer() &&
                      record["step"].get<int64_t>() <= step;
    if (keep) {
      kept += line + '\n';
    } else {
      dropped = true;
    }
  }
  in.close();
  if (dropped) io::write_file_atomic(path, kept);
}

}  // namespace

std::vector<std::string> config_differences(const std::string& before_yaml, const std::string& after_yaml) {
  const auto before = flattened(before_yaml), after = flattened(after_yaml);
  std::vector<std::string> out;
  auto value = [](const std::map<std::string, std::string>& side, const std::string& key) {
    const auto it = side.find(key);
    return it == side.end() ? std::string("(absent)") : it->second;
  };
  std::map<std::string, bool> keys;
  for (const auto& kv : before) keys[kv.first] = true;
  for (const auto& kv : after) keys[kv.first] = true;
  for (const auto& kv : keys) {
    const std::string was = value(before, kv.first), now = value(after, kv.first);
    if (was != now) out.push_back(kv.first + ": " + was + " -> " + now);
  }
  return out;
}

CommandOutput::CommandOutput(fs::path folder, std::string command, std::vector<std::string> outputs)
    : folder_(std::move(folder)), command_(std::move(command)), outputs_(std::move(outputs)) {}

CommandOutput::~CommandOutput() { discard_staged(); }

namespace {

// An output's name in the folder: "images/" (a folder) is "images".
std::string output_name(const std::string& output) {
  return output.back() == '/' ? output.substr(0, output.size() - 1) : output;
}

constexpr const char* kPending = "pending";

}  // namespace

std::optional<std::map<std::string, std::string>> CommandOutput::recorded() const {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(marker(), ec))) return std::nullopt;
  std::ifstream in(marker());
  std::string line;
  std::getline(in, line);  // "written by ..."
  // Only the command's own outputs: a line naming anything else ("../x", edited in) is no output
  // of it, and finish() removes what the marker names.
  std::map<std::string, std::string> out;
  while (std::getline(in, line)) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    const bool own = std::any_of(outputs_.begin(), outputs_.end(),
                                 [&](const std::string& output) { return output_name(output) == name; });
    if (own) out[name] = line.substr(space + 1);
  }
  return out;
}

void CommandOutput::write_marker(const std::map<std::string, std::string>& outputs) const {
  std::string text = "written by " + command_ + "; on its next run it replaces these outputs of its own, " +
                     "if they are still what it wrote (name, then size and mtime; pending: being written):\n";
  for (const auto& [name, print] : outputs) text += name + " " + print + "\n";
  io::write_file_atomic(marker(), text);
}

void CommandOutput::check() const {
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(folder_, ec);
  const fs::file_status folder = fs::status(folder_, ec);
  OML_CHECK(!fs::is_symlink(link) || fs::exists(folder), UsageError, folder_.string(),
            " is a link to nothing; ", command_, " writes its outputs into a folder");
  OML_CHECK(!fs::exists(folder) || fs::is_directory(folder), UsageError, folder_.string(),
            " is a file, not a folder; ", command_, " writes its outputs into a folder");
  const auto ours = recorded();
  for (const std::string& output : outputs_) {
    const bool is_folder = output.back() == '/';
    const std::string name = output_name(output);
    const fs::file_status status = fs::symlink_status(folder_ / name, ec);
    if (!fs::exists(status) && !fs::is_symlink(status)) continue;
    if (!ours) {
      throw UsageError(folder_.string() + " already holds " + name + ", which " + command_ +
                       " did not write (no ." + command_ +
                       " marker there); it is never overwritten: choose another folder, or move it away");
    }
    if (!ours->empty()) {
      const auto entry = ours->find(name);
      OML_CHECK(entry != ours->end(), UsageError, folder_.string(), " already holds ", name, ", which ",
                command_, " did not write (its .", command_,
                " marker does not list it); it is never overwritten: choose another folder, or move it away");
      OML_CHECK(entry->second == kPending || entry->second == io::entry_fingerprint(folder_ / name),
                UsageError, (folder_ / name).string(), " is no longer the file ", command_,
                " wrote there (replaced, changed or made a link since); it is never overwritten: choose "
                "another folder, or move it away");
    }
    // Its own earlier output is replaced, but only by one of the same kind (a rename cannot put a
    // file where a folder is).
    OML_CHECK(fs::is_directory(status) == is_folder, UsageError, (folder_ / name).string(), " is a ",
              is_folder ? "file" : "folder", " where ", command_, " writes a ", is_folder ? "folder" : "file",
              "; move it away");
  }
}

void CommandOutput::claim(const std::vector<std::string>& written) {
  std::error_code ec;
  fs::create_directories(folder_, ec);
  OML_CHECK(!ec, RuntimeError, "cannot create ", folder_.string(), ": ", ec.message());
  // The lock file stays, as the marker does: the command's next run locks it again.
  lock_ = io::LockFile::try_lock(folder_ / ("." + command_ + ".lock"), command_);
  if (!lock_.held()) {
    throw UsageError("another " + command_ + " is writing its outputs into " + folder_.string() +
                     " now; two never write one folder at once: wait for it, or choose another folder");
  }
  check();
  const auto before = recorded();
  std::map<std::string, std::string> outputs = before.value_or(std::map<std::string, std::string>{});
  if (before && before->empty()) {  // a marker that lists nothing: what is there is its own
    for (const std::string& output : outputs_) {
      const std::string name = output_name(output);
      const fs::file_status status = fs::symlink_status(folder_ / name, ec);
      if (fs::exists(status)) outputs[name] = io::entry_fingerprint(folder_ / name);
    }
  }
  earlier_ = outputs;  // what an output claimed and then not produced goes back to
  written_.clear();
  for (const std::string& output : written) {
    OML_ASSERT(std::find(outputs_.begin(), outputs_.end(), output) != outputs_.end(), command_,
               " writes no output named ", output);
    written_.push_back(output_name(output));
    outputs[output_name(output)] = kPending;
  }
  // Written into the marker by finish(), right before the staged outputs are moved into place:
  // until then the outputs in the folder are the earlier run's, untouched.
  claimed_ = std::move(outputs);
  // Half-written outputs of an earlier run of this command that was killed mid-write (SIGKILL:
  // other signals clean up themselves); only those whose process is gone.
  for (const std::string& output : outputs_) io::remove_stale_temporaries(folder_, output_name(output));
}

fs::path CommandOutput::stage(const std::string& output) {
  const std::string name = output_name(output);
  OML_ASSERT(lock_.held() && std::find(written_.begin(), written_.end(), name) != written_.end(), command_,
             " stages ", output, " without claiming it");
  OML_ASSERT(staged_.count(name) == 0, command_, " stages ", output, " twice");
  const fs::path staged = io::temporary_sibling(folder_ / name);
  pending_.push_back(std::make_unique<io::PendingFile>(staged));
  staged_.emplace(name, staged);
  return staged;
}

void CommandOutput::discard_staged() noexcept {
  for (const auto& [name, staged] : staged_) {
    std::error_code ignored;
    fs::remove_all(staged, ignored);
  }
  staged_.clear();
  pending_.clear();
}

void CommandOutput::drop_unproduced() {
  // An output claimed and not produced (unstaged, or staged and never written: no grid drawn)
  // counts as not written: the earlier run's is then removed, as any this run did not write again.
  std::error_code ec;
  for (const std::string& name : std::vector<std::string>(written_)) {
    const auto staged = staged_.find(name);
    if (staged != staged_.end() && fs::exists(fs::symlink_status(staged->second, ec))) continue;
    if (staged != staged_.end()) staged_.erase(staged);
    written_.erase(std::remove(written_.begin(), written_.end(), name), written_.end());
    const auto earlier = earlier_.find(name);
    if (earlier != earlier_.end()) {
      claimed_[name] = earlier->second;
    } else {
      claimed_.erase(name);
    }
  }
}

void CommandOutput::publish_staged() {
  std::error_code ec;
  std::vector<fs::path> replaced;  // earlier folders moved aside, removed once all is in place
  std::string failure;
  io::publish([&] {
    for (const auto& [name, staged] : staged_) {
      const fs::path path = folder_ / name;
      std::error_code absent, step;  // a missing `path` is no error: it is the first run's case
      // rename() puts a file over a file, but never a folder over a folder that holds anything.
      if (fs::is_directory(fs::symlink_status(path, absent))) {
        const fs::path aside = io::temporary_sibling(path);
        fs::rename(path, aside, step);
        if (!step) replaced.push_back(aside);
      }
      if (!step) fs::rename(staged, path, step);
      if (step && failure.empty())
        failure = "cannot move " + staged.string() + " to " + path.string() + ": " + step.message();
    }
  });
  for (const fs::path& aside : replaced) fs::remove_all(aside, ec);
  OML_CHECK(failure.empty(), RuntimeError, failure);
}

void CommandOutput::finish() {
  OML_ASSERT(lock_.held(), "CommandOutput::finish without claim");
  // The outputs this run wrote are "pending" in the marker while they move into place: a run
  // killed among the renames leaves them its own, not a stranger's.
  drop_unproduced();
  write_marker(claimed_);
  publish_staged();
  pending_.clear();  // in place: no longer this process's to remove
  staged_.clear();
  std::map<std::string, std::string> outputs = claimed_;
  for (auto it = outputs.begin(); it != outputs.end();) {
    const std::string& name = it->first;
    if (std::find(written_.begin(), written_.end(), name) != written_.end()) {
      it->second = io::entry_fingerprint(folder_ / name);
      ++it;
      continue;
    }
    // An earlier output not written again: removed if it is still the one the command wrote. One
    // an interrupted run was writing (pending) is kept as what it is now: it may be anyone's.
    const std::string now = io::entry_fingerprint(folder_ / name);
    if (it->second == kPending && now != "absent") {
      it->second = now;
      ++it;
      continue;
    }
    if (it->second == now && now != "absent") {
      std::error_code ec;
      if (fs::remove_all(folder_ / name, ec) > 0 && !ec) {
        log::info("removed " + (folder_ / name).string() + " of an earlier " + command_ +
                  " (not written by this one)");
      }
    }
    it = outputs.erase(it);
  }
  write_marker(outputs);
  lock_ = io::LockFile();
}

CommandOutput validation_output(const std::string& logs_root, const std::string& run_name,
                                const std::string& postfix) {
  const std::string name =
      run_name.empty() ? default_run_name(postfix.empty() ? "validate" : postfix) : run_name;
  return CommandOutput(fs::path(logs_root) / name, "oml-validate", {"metrics.json", "images/"});
}

CommandOutput prediction_output(const std::string& save_dir) {
  return CommandOutput(save_dir, "oml-predict",
                       {"embeddings.npy", "embeddings.pt", "embeddings.csv", "neighbours.csv",
                        "neighbours_ids.npy", "neighbours_distances.npy"});
}

void RunDir::truncate_logs_after(int64_t step) const {
  truncate_jsonl(path_ / "train.jsonl", step);
  truncate_jsonl(path_ / "metrics.jsonl", step);
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
