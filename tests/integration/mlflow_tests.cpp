// logger: {name: mlflow}: runs sent to a real `mlflow server` (the pinned mlflow of
// scripts/requirements-tests.txt, SQLite backend, proxied artifacts) and written as a file store,
// read back with MLflow's own client (tests/python/mlflow_dump_run.py) and compared with
// train.jsonl / metrics.jsonl; a server that is never there, killed and restarted, or answering
// every third request with a 500 (tests/python/mlflow_flaky_proxy.py); Ctrl-C and --resume.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "oml/io/checkpoint.h"
#include "pipeline_fixtures.h"

namespace mlflow_tests {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using nlohmann::json;
using oml::test::command_path;
using oml::test::quote;
using oml::test::read_jsonl;
using oml::test::run;
using oml::test::TempDir;
using oml::test::write_file;

namespace {

// The mlflow CLI next to the tests' Python (scripts/requirements-tests.txt pins it); its job runner
// (seven huey processes) is not needed and would slow a 2-core machine down.
std::string mlflow_server() {
  return "env MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false " +
         quote((fs::path(OML_PYTHON).parent_path() / "mlflow").string()) + " server";
}

std::string python_script(const std::string& name) {
  return oml::test::python() + " " + quote(oml::test::source_path("tests/python/" + name));
}

// Starts `command` in a session of its own (so that the whole process group can be killed), its
// output into `log`; returns its pid.
int spawn(const std::string& command, const fs::path& log) {
  const auto r = run("setsid bash -c " + quote("exec " + command) + " > " + quote(log.string()) +
                     " 2>&1 < /dev/null & echo $!");
  REQUIRE(r.exit_code == 0);
  return std::stoi(r.out);
}

// A process that has not ended (a zombie nobody reaped yet has ended).
bool alive(int pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

void kill_group(int pid) {
  if (pid <= 0) return;
  ::kill(-pid, SIGKILL);
  for (int i = 0; i < 200 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// Waits until `url` answers anything (up to two minutes: a loaded 2-core machine starts `mlflow
// server` in 5 to 20 s).
void wait_until_answering(const std::string& url, const fs::path& log) {
  const auto r = run(
      "for i in $(seq 1200); do curl -s -o /dev/null " + quote(url) + " && exit 0; sleep 0.1; done; exit 1",
      150);
  INFO(oml::test::read_file(log));
  REQUIRE(r.exit_code == 0);
}

// `mlflow server` on 127.0.0.1 with a SQLite store and proxied artifacts in `dir`; killed (the whole
// process group) by stop() or the destructor. start() again reuses the port and the store.
class MlflowServer {
 public:
  explicit MlflowServer(fs::path dir) : dir_(std::move(dir)), port_(oml::test::free_port()) {
    fs::create_directories(dir_);
    start();
  }
  ~MlflowServer() { stop(); }
  MlflowServer(const MlflowServer&) = delete;
  MlflowServer& operator=(const MlflowServer&) = delete;

  void start() {
    pid_ =
        spawn(mlflow_server() + " --host 127.0.0.1 --port " + std::to_string(port_) +
                  " --workers 1 --backend-store-uri " + quote("sqlite:///" + (dir_ / "mlflow.db").string()) +
                  " --artifacts-destination " + quote((dir_ / "artifacts").string()) + " --serve-artifacts",
              dir_ / ("server-" + std::to_string(++starts_) + ".log"));
    wait_until_answering(uri() + "/health", dir_ / ("server-" + std::to_string(starts_) + ".log"));
  }
  void stop() {
    kill_group(pid_);
    pid_ = 0;
  }
  int port() const { return port_; }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }
  fs::path artifacts() const { return dir_ / "artifacts"; }

 private:
  fs::path dir_;
  int port_;
  int pid_ = 0;
  int starts_ = 0;
};

// The experiment's one run as MLflow's client reads it (tests/python/mlflow_dump_run.py).
json dump_run(const std::string& uri, const std::string& experiment) {
  const auto r = run(python_script("mlflow_dump_run.py") + " " + quote(uri) + " " + quote(experiment), 180);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

using Series = std::map<std::string, std::vector<std::pair<int64_t, double>>>;

// What the run logged, by metric key: "train/<key>" of every train.jsonl number, every
// metrics.jsonl metric, at their steps.
Series logged_series(const fs::path& run_dir) {
  Series series;
  for (const auto& record : read_jsonl(run_dir / "train.jsonl")) {
    for (const auto& item : record.items()) {
      if (item.key() == "epoch" || item.key() == "step" || !item.value().is_number()) continue;
      series["train/" + item.key()].emplace_back(record.at("step").get<int64_t>(),
                                                 item.value().get<double>());
    }
  }
  if (fs::exists(run_dir / "metrics.jsonl")) {
    for (const auto& record : read_jsonl(run_dir / "metrics.jsonl")) {
      for (const auto& item : record.at("metrics").items())
        series[item.key()].emplace_back(record.at("step").get<int64_t>(), item.value().get<double>());
    }
  }
  return series;
}

Series mlflow_series(const json& dumped) {
  Series series;
  for (const auto& item : dumped.at("metrics").items()) {
    for (const auto& point : item.value())
      series[item.key()].emplace_back(point[0].get<int64_t>(), point[1].get<double>());
  }
  return series;
}

// Every value the run logged is in MLflow once, at its step (values after `last_step` aside: a
// run interrupted between a train.jsonl line and its logging may miss its last step).
void check_every_value(const json& dumped, const fs::path& run_dir,
                       int64_t last_step = std::numeric_limits<int64_t>::max()) {
  Series expected = logged_series(run_dir);
  Series got = mlflow_series(dumped);
  REQUIRE_FALSE(expected.empty());
  for (auto& [key, values] : expected) {
    INFO(key);
    std::erase_if(values, [&](const auto& v) { return v.first > last_step; });
    REQUIRE(got.count(key) == 1);
    auto& sent = got[key];
    std::erase_if(sent, [&](const auto& v) { return v.first > last_step; });
    REQUIRE(sent.size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      CHECK(sent[i].first == values[i].first);
      CHECK(sent[i].second == Approx(values[i].second).epsilon(1e-12));
    }
  }
  for (const auto& [key, values] : got) {
    INFO(key);
    CHECK(expected.count(key) == 1);  // nothing MLflow has that the run did not log
  }
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Lines of pending.jsonl that still wait to be sent (values and files, not the run's id or acks).
std::size_t waiting(const fs::path& run_dir) {
  std::size_t sent = 0, n = 0;
  std::vector<uint64_t> seqs;
  for (const auto& line : read_jsonl(run_dir / "mlflow" / "pending.jsonl")) {
    if (line.contains("sent")) sent = std::max<std::size_t>(sent, line["sent"].get<uint64_t>());
    if (line.contains("op")) seqs.push_back(line["seq"].get<uint64_t>());
  }
  for (auto seq : seqs) n += seq > sent;
  return n;
}

std::string mlflow_logger(const std::string& args) {
  return "logger: {name: mlflow, args: {" + args + "}}\n";
}

oml::test::CommandResult train(const TempDir& dir, const std::string& extra, const std::string& args = "",
                               const std::string& env = "") {
  write_file(dir / "train.yaml", oml::test::train_config(dir / "logs", extra));
  return run(env + " " + quote(command_path("oml-train")) + " --config " +
                 quote((dir / "train.yaml").string()) + " --progress quiet " + args,
             300);
}

// Starts oml-train in the background (job control on: SIGINT is not ignored), stderr into `err`.
int start_training(const fs::path& config, const std::string& args, const fs::path& err) {
  // bash: its `set -m` gives the job a process group of its own with SIGINT not ignored.
  const std::string script = "set -m; " + quote(command_path("oml-train")) + " --config " +
                             quote(config.string()) + " --progress quiet " + args + " > /dev/null 2> " +
                             quote(err.string()) + " < /dev/null & echo $!";
  const auto r = run("bash -c " + quote(script));
  REQUIRE(r.exit_code == 0);
  return std::stoi(r.out);
}

std::size_t lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::size_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

// Waits (up to two minutes) until `file` has at least `n` lines.
void wait_for_lines(const fs::path& file, std::size_t n) {
  for (int i = 0; i < 2400 && lines_of(file) < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(lines_of(file) >= n);
}

// Kills a background training that a failed REQUIRE left running.
struct KillOnExit {
  int pid;
  ~KillOnExit() {
    if (pid > 0 && alive(pid)) ::kill(pid, SIGKILL);
  }
};

// Waits (up to a minute) until `file` holds `text`.
void wait_for_text(const fs::path& file, const std::string& text) {
  for (int i = 0; i < 1200 && oml::test::read_file(file).find(text) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  INFO(oml::test::read_file(file));
  REQUIRE(oml::test::read_file(file).find(text) != std::string::npos);
}

// SIGINT to `pid`, then waits (up to a minute) until it has ended.
void interrupt(int pid) {
  REQUIRE(::kill(pid, SIGINT) == 0);
  for (int i = 0; i < 1200 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(alive(pid));
}

}  // namespace

TEST_CASE("The mlflow logger sends params, tags, every value, the files and FINISHED to a real MLflow server",
          "[mlflow][integration]") {
  TempDir dir;
  MlflowServer server(dir / "server");
  const auto r = train(dir, "tags: [fmnist]\nlog_images: true\n" +
                                mlflow_logger("experiment_name: served, tracking_uri: '" + server.uri() +
                                              "', tags: {team: metric-learning}, log_model: true"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("warning"));
  const fs::path run_dir = dir / "logs" / "run";
  json got = dump_run(server.uri(), "served");
  CHECK(got["status"] == "FINISHED");
  CHECK(got["run_name"] == "run");
  check_every_value(got, run_dir);

  // OML's params: the config flattened with "/", plus the run directory's name.
  json& params = got["params"];
  CHECK(params["criterion/args/margin"] == "0.2");
  CHECK(params["criterion/args/miner/name"] == "hard_triplets");
  CHECK(params["max_epochs"] == "2");
  CHECK(params["metric_args/cmc_top_k"] == "[1,5]");
  CHECK(params["dir"] == "run");
  // OML's tags (each the value "tag"), the args' tags, MLflow's own.
  json& tags = got["tags"];
  CHECK(tags["fmnist"] == "tag");
  CHECK(tags["run"] == "tag");
  CHECK(tags["team"] == "metric-learning");
  CHECK(tags["mlflow.runName"] == "run");
  CHECK(tags["mlflow.source.name"] == "oml-cpp");

  // Files: config.yaml, report.html, the checkpoints (log_model: true, at the end), the grids.
  const std::vector<std::string> artifacts = got["artifacts"];
  for (const char* name :
       {"config.yaml", "report.html", "checkpoints/best.ckpt", "checkpoints/last.ckpt",
        "images/retrieval/worst_cmc_1/step_3.png", "images/retrieval/worst_cmc_1/step_6.png"}) {
    INFO(name);
    CHECK(std::count(artifacts.begin(), artifacts.end(), name) == 1);
  }
  CHECK(artifacts.size() == 6);
  const std::string run_id = got["run_id"];
  fs::path stored;
  for (const auto& entry : fs::recursive_directory_iterator(server.artifacts())) {
    if (entry.path().filename() == "last.ckpt") stored = entry.path();
  }
  REQUIRE_FALSE(stored.empty());
  CHECK(stored.string().find(run_id) != std::string::npos);
  CHECK(oml::test::read_file(stored) == oml::test::read_file(run_dir / "checkpoints" / "last.ckpt"));
  CHECK(oml::test::read_file(stored.parent_path().parent_path() / "config.yaml") ==
        oml::test::read_file(run_dir / "config.yaml"));

  // The checkpoints name the run (so that --resume continues it); nothing waits any more.
  const auto last = oml::io::load_checkpoint(run_dir / "checkpoints" / "last.ckpt");
  REQUIRE(last.resume.has_value());
  CHECK(last.resume->logger_run_id == "mlflow:" + run_id);
  CHECK(waiting(run_dir) == 0);
  CHECK(fs::is_empty(run_dir / "mlflow" / "files"));
}

TEST_CASE("With no MLflow server training succeeds, warns once and keeps every value in pending.jsonl",
          "[mlflow][integration]") {
  TempDir dir;
  const int port = oml::test::free_port();  // nobody listens there
  const auto r = train(dir, mlflow_logger("experiment_name: nowhere, tracking_uri: 'http://127.0.0.1:" +
                                          std::to_string(port) + "'"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count(r.err, "cannot be reached") == 1);
  CHECK_THAT(r.err, Contains("could not be sent") && Contains("pending.jsonl"));
  const fs::path run_dir = dir / "logs" / "run";
  std::size_t values = 0;
  for (const auto& [key, series] : logged_series(run_dir)) values += series.size();
  std::size_t metric_lines = 0, status_lines = 0;
  for (const auto& line : read_jsonl(run_dir / "mlflow" / "pending.jsonl")) {
    metric_lines += line.value("op", "") == "metric";
    status_lines += line.value("op", "") == "status" && line.value("key", "") == "FINISHED";
  }
  CHECK(metric_lines == values);
  CHECK(status_lines == 1);
  CHECK(fs::exists(run_dir / "checkpoints" / "last.ckpt"));  // training itself went as always
}

// The values pending.jsonl still holds for sending (those after its last acknowledgement), by key.
Series pending_series(const fs::path& run_dir) {
  uint64_t sent = 0;
  const auto lines = read_jsonl(run_dir / "mlflow" / "pending.jsonl");
  for (const auto& line : lines) {
    if (line.contains("sent")) sent = std::max(sent, line["sent"].get<uint64_t>());
  }
  Series series;
  for (const auto& line : lines) {
    if (line.value("op", "") == "metric" && line["seq"].get<uint64_t>() > sent)
      series[line["key"].get<std::string>()].emplace_back(line["step"].get<int64_t>(),
                                                          line["value"].get<double>());
  }
  return series;
}

// Each value of train.jsonl and metrics.jsonl up to `last_step` is in `where` at least once, at its step.
void check_each_value_in(const Series& where, const fs::path& run_dir,
                         int64_t last_step = std::numeric_limits<int64_t>::max()) {
  for (const auto& [key, values] : logged_series(run_dir)) {
    INFO(key);
    REQUIRE(where.count(key) == 1);
    const auto& there = where.at(key);
    for (const auto& [step, value] : values) {
      if (step > last_step) continue;
      INFO("step " << step);
      CHECK(std::count_if(there.begin(), there.end(), [&](const auto& v) {
              return v.first == step && v.second == Approx(value).epsilon(1e-12);
            }) >= 1);
    }
  }
}

// Ctrl-C gives the logger a few seconds (finish(KILLED)) while training goes on queueing, so the
// values of the last steps may still wait in pending.jsonl when the process ends: every value is
// then in MLflow or there, and --resume sends them (those up to the checkpoint; the resumed
// training logs the later steps again).
TEST_CASE(
    "An MLflow server killed and restarted mid-run gets every value, Ctrl-C ends it KILLED and --resume "
    "sends "
    "what waited",
    "[mlflow][integration]") {
  TempDir dir;
  MlflowServer server(dir / "server");
  const fs::path run_dir = dir / "logs" / "run";
  const fs::path train_log = run_dir / "train.jsonl";
  write_file(
      dir / "train.yaml",
      oml::test::train_config(
          dir / "logs", mlflow_logger("experiment_name: restarted, tracking_uri: '" + server.uri() + "'")));
  const int pid = start_training(dir / "train.yaml", "--set max_epochs=1000", dir / "train.err");
  const KillOnExit guard{pid};
  wait_for_lines(train_log, 4);
  server.stop();                                       // SIGKILL: no goodbye
  wait_for_lines(train_log, lines_of(train_log) + 6);  // steps logged while it is away
  server.start();                                      // same port, same store
  wait_for_text(dir / "train.err", "answers again");   // the logger is through again (its backoff is <= 8 s)
  wait_for_lines(train_log, lines_of(train_log) + 6);  // and some steps once it is back
  interrupt(pid);
  const std::string err = oml::test::read_file(dir / "train.err");
  INFO(err);
  CHECK_THAT(err, Contains("cannot be reached") && Contains("answers again") &&
                      Contains("oml-train: interrupted by signal 2 (SIGINT)"));
  const json killed = dump_run(server.uri(), "restarted");
  CHECK(killed["status"] == "KILLED");
  // The interrupt may land between a step's train.jsonl line and its logging: the last step aside.
  const int64_t last_step = read_jsonl(train_log).back().at("step").get<int64_t>();
  Series sent_or_waiting = mlflow_series(killed);
  for (const auto& [key, values] : pending_series(run_dir)) {
    auto& all = sent_or_waiting[key];
    all.insert(all.end(), values.begin(), values.end());
  }
  check_each_value_in(sent_or_waiting, run_dir, last_step - 1);

  const auto checkpoint = oml::io::load_checkpoint(run_dir / "checkpoints" / "last.ckpt");
  const auto r = run(quote(command_path("oml-train")) + " --config " + quote((dir / "train.yaml").string()) +
                         " --progress quiet --set max_epochs=" + std::to_string(checkpoint.epoch + 1) +
                         " --resume " + quote((run_dir / "checkpoints" / "last.ckpt").string()),
                     300);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json resumed = dump_run(server.uri(), "restarted");  // the same run, now complete
  CHECK(resumed["run_id"] == killed["run_id"]);
  CHECK(resumed["status"] == "FINISHED");
  // train.jsonl is cut back to the checkpoint and continued: every value of it is in MLflow.
  check_each_value_in(mlflow_series(resumed), run_dir);
  CHECK(waiting(run_dir) == 0);
}

TEST_CASE("Through a proxy that answers every third request with a 500, MLflow gets every value exactly once",
          "[mlflow][integration]") {
  TempDir dir;
  MlflowServer server(dir / "server");
  const int port = oml::test::free_port();
  const fs::path counts = dir / "proxy-counts";
  const int proxy = spawn(python_script("mlflow_flaky_proxy.py") + " " + std::to_string(port) + " " +
                              std::to_string(server.port()) + " " + quote(counts.string()),
                          dir / "proxy.log");
  const std::string uri = "http://127.0.0.1:" + std::to_string(port);
  wait_until_answering(uri + "/health", dir / "proxy.log");
  const auto r = train(dir, "log_images: true\n" + mlflow_logger("experiment_name: flaky, tracking_uri: '" +
                                                                 uri + "', log_model: all"));
  kill_group(proxy);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count(r.err, "answered HTTP 500") == 1);  // one warning, then quiet retries
  std::istringstream numbers(oml::test::read_file(counts));
  int requests = 0, injected = 0;
  numbers >> requests >> injected;
  CHECK(injected >= 5);
  json got = dump_run(server.uri(), "flaky");
  CHECK(got["status"] == "FINISHED");
  check_every_value(got, dir / "logs" / "run");
  const std::vector<std::string> artifacts = got["artifacts"];
  CHECK(artifacts.size() == 6);  // config, report, best + last (log_model: all), two grids
  CHECK(got["params"]["criterion/args/margin"] == "0.2");
}

TEST_CASE("OML's configs/logger/mlflow.yaml writes a file store in the run directory that MlflowClient reads",
          "[mlflow][integration]") {
  TempDir dir;
  const auto r = train(dir, "defaults:\n  - logger: mlflow\n");  // file:./ml-runs, experiment test_project
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("warning"));
  const fs::path run_dir = dir / "logs" / "run";
  REQUIRE(fs::exists(run_dir / "ml-runs" / "0" / "meta.yaml"));  // MLflow's Default experiment
  json got = dump_run("file:" + (run_dir / "ml-runs").string(), "test_project");
  CHECK(got["status"] == "FINISHED");
  CHECK(got["run_name"] == "run");
  check_every_value(got, run_dir);
  CHECK(got["params"]["criterion/args/margin"] == "0.2");
  CHECK(got["params"]["dir"] == "run");
  CHECK(got["tags"]["run"] == "tag");
  CHECK(got["artifacts"] == json::array({"config.yaml", "report.html"}));
  const auto last = oml::io::load_checkpoint(run_dir / "checkpoints" / "last.ckpt");
  CHECK(last.resume->logger_run_id == "mlflow:" + got["run_id"].get<std::string>());
}

TEST_CASE("MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME stand in for absent args",
          "[mlflow][integration]") {
  TempDir dir;
  const fs::path store = dir / "store";
  const auto r =
      train(dir, "logger: {name: mlflow}\n", "--set max_epochs=1",
            "MLFLOW_TRACKING_URI=" + quote("file://" + store.string()) + " MLFLOW_EXPERIMENT_NAME=from_env");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json got = dump_run("file:" + store.string(), "from_env");
  CHECK(got["status"] == "FINISHED");
  check_every_value(got, dir / "logs" / "run");
  CHECK_FALSE(fs::exists(dir / "logs" / "run" / "mlruns"));  // save_dir is only the last resort
}

TEST_CASE("Ctrl-C ends the MLflow run KILLED and --resume continues the same run to FINISHED",
          "[mlflow][integration]") {
  TempDir dir;
  const fs::path run_dir = dir / "logs" / "run";
  write_file(
      dir / "train.yaml",
      oml::test::train_config(dir / "logs", mlflow_logger("experiment_name: resumed, tracking_uri: store")));
  const int pid = start_training(dir / "train.yaml", "--set max_epochs=1000", dir / "train.err");
  const KillOnExit guard{pid};
  wait_for_lines(run_dir / "metrics.jsonl", 1);  // after epoch 1's checkpoint
  interrupt(pid);
  const std::string uri = "file:" + (run_dir / "store").string();
  json killed = dump_run(uri, "resumed");
  CHECK(killed["status"] == "KILLED");

  const auto checkpoint = oml::io::load_checkpoint(run_dir / "checkpoints" / "last.ckpt");
  REQUIRE(checkpoint.resume.has_value());
  CHECK(checkpoint.resume->logger_run_id == "mlflow:" + killed["run_id"].get<std::string>());
  const auto r = run(quote(command_path("oml-train")) + " --config " + quote((dir / "train.yaml").string()) +
                     " --progress quiet --set max_epochs=" + std::to_string(checkpoint.epoch + 1) +
                     " --resume " + quote((run_dir / "checkpoints" / "last.ckpt").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json resumed = dump_run(uri, "resumed");  // still one run in the experiment
  CHECK(resumed["run_id"] == killed["run_id"]);
  CHECK(resumed["status"] == "FINISHED");
  CHECK(resumed["tags"]["oml.resumed_at_step"] == std::to_string(checkpoint.step));
  // Every step up to the checkpoint's, then the resumed steps: each value of train.jsonl (which the
  // resume cut back to the checkpoint) is there; the killed process's steps after the checkpoint
  // stay as well (MLflow's metrics are append-only).
  check_each_value_in(mlflow_series(resumed), run_dir);
}

TEST_CASE("A tracking URI that oml-cpp does not write is a config error naming tracking_uri",
          "[mlflow][integration]") {
  TempDir dir;
  const auto r = train(dir, mlflow_logger("tracking_uri: 'sqlite:///mlflow.db'"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("logger.args.tracking_uri") && Contains("sqlite:///mlflow.db") &&
                        Contains("mlflow server --backend-store-uri"));
  const auto unknown = train(dir, mlflow_logger("tracking_url: x"));
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("tracking_url") && Contains("tracking_uri"));
}

}  // namespace mlflow_tests
