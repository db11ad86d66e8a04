// `logger: clearml` with OML's args writes an offline ClearML session that ClearML's own
// Task.import_offline_session imports (tests/python/clearml_offline_import.py, against a local
// stand-in for the server that records what the import sends): the task, its hyperparams and
// config, every scalar of train.jsonl and metrics.jsonl at its step, the debug images and the
// artifacts byte for byte. A resumed run continues the same session with each step once.
#include "oml/common/sha256.h"
#include "oml/io/checkpoint.h"
#include "oml/report/clearml_task.h"
#include "tracker_fixtures.h"

namespace clearml_tests {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using oml::test::quote;
using oml::test::read_jsonl;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

// OML's configs/logger/clearml.yaml.
const std::string kLogger =
    "logger: {name: clearml, args: {project_name: test_project, task_name: test, offline_mode: true}}\n";

oml::test::CommandResult train(const TempDir& dir, const std::string& extra, const std::string& args = "") {
  return oml::test::train_with_logger(dir, kLogger, extra, args);
}

fs::path session(const fs::path& run) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(run / "clearml"))
    if (entry.is_directory()) found.push_back(entry.path());
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0].filename().string(), StartsWith("offline-"));
  return found[0];
}

nlohmann::json import_with_clearml(const fs::path& session_path) {
  const auto r = oml::test::run(oml::test::python() + " " +
                                    quote(oml::test::source_path("tests/python/clearml_offline_import.py")) +
                                    " " + quote(session_path.string()),
                                120);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("Failed reporting") && !Contains("failed logging"));
  const auto imported = nlohmann::json::parse(r.out);
  CHECK(imported.at("task").at("status") == "completed");
  return imported;
}

std::vector<nlohmann::json> events_of_type(const nlohmann::json& imported, const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& event : imported.at("events"))
    if (event.at("type") == type) out.push_back(event);
  return out;
}

// Every number of train.jsonl is the scalar train/<key> and every metric of metrics.jsonl the
// scalar <metric> (title = series = the key, as OML's ClearMLLogger reports), each step once.
void check_scalars_match_logs(const nlohmann::json& imported, const fs::path& run) {
  const auto expected = oml::test::logged_values(run);
  REQUIRE(expected.count({"OVERALL/cmc/1", 6}) == 1);
  std::map<std::pair<std::string, int64_t>, double> got;
  for (const auto& event : events_of_type(imported, "training_stats_scalar")) {
    CHECK(event.at("variant") == event.at("metric"));
    CHECK(event.at("task") == imported.at("task_id"));
    const auto key = std::make_pair(event.at("metric").get<std::string>(), event.at("iter").get<int64_t>());
    INFO(key.first << " at " << key.second);
    CHECK(got.count(key) == 0);  // each step once
    got[key] = event.at("value").get<double>();
  }
  CHECK(got == expected);
}

std::string sha256_of(const fs::path& file) { return oml::sha256_file_hex(file); }

// The upload of a remote url's path (the stand-in server records uploads by path).
const nlohmann::json& upload_of(const nlohmann::json& imported, const std::string& url) {
  const std::string path = url.substr(url.find('/', url.find("//") + 2) + 1);
  INFO(path);
  REQUIRE(imported.at("uploads").contains(path));
  return imported.at("uploads").at(path);
}

}  // namespace

TEST_CASE(
    "logger: clearml writes an offline session that ClearML imports: task, hyperparams, scalars, "
    "images, artifacts",
    "[clearml][integration]") {
  TempDir dir;
  const auto r = train(dir, "log_images: true\ntags: [mine]\npostfix: exp\n");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  const fs::path folder = session(run);
  const std::string id = folder.filename().string();
  CHECK(id.size() == std::string("offline-").size() + 32);
  const fs::path zip = folder.string() + ".zip";
  CHECK(fs::exists(zip));
  CHECK_THAT(r.err, Contains("Task.import_offline_session(\"" + zip.string() + "\")"));
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").resume->logger_run_id == "clearml:" + id);

  const nlohmann::json imported = import_with_clearml(zip);
  CHECK(imported.at("project") == "test_project");
  const auto& task = imported.at("task");
  CHECK(task.at("name") == "test");
  CHECK(task.at("type") == "training");
  // OML's tags: the config's, the postfix, the run folder.
  CHECK(task.at("tags") == nlohmann::json({"mine", "exp", "run"}));
  // The config flattened with "|", as Task.connect stores a dict: str() of scalars, json.dumps()
  // of lists, with Python's type names.
  const auto& general = task.at("hyperparams").at("General");
  const auto param = [&](const std::string& name) {
    INFO(name);
    REQUIRE(general.contains(name));
    return std::make_pair(general.at(name).at("value").get<std::string>(),
                          general.at(name).value("type", ""));
  };
  CHECK(param("optimizer|args|lr") == std::make_pair(std::string("0.001"), std::string("float")));
  CHECK(param("max_epochs") == std::make_pair(std::string("2"), std::string("int")));
  CHECK(param("metric_args|cmc_top_k") == std::make_pair(std::string("[1, 5]"), std::string("list/int")));
  CHECK(param("logger|args|offline_mode") == std::make_pair(std::string("True"), std::string("bool")));
  CHECK(param("dir") == std::make_pair(std::string("run"), std::string("str")));
  CHECK(task.at("configuration").at("OmegaConf").at("value") == oml::test::read_file(run / "config.yaml"));

  check_scalars_match_logs(imported, run);
  // The worst-query grid of each validation: a debug image at the validation's step, uploaded.
  const auto metrics = read_jsonl(run / "metrics.jsonl");
  const auto images = events_of_type(imported, "training_debug_image");
  REQUIRE(images.size() == metrics.size());
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    CHECK(images[i].at("metric") == "retrieval/worst_cmc_1");
    CHECK(images[i].at("iter") == metrics[i].at("step"));
    CHECK(upload_of(imported, images[i].at("url")).at("sha256") ==
          sha256_of(oml::test::grid_file(run, i + 1)));
  }
  // The artifacts, uploaded as they are at the end of the run.
  std::map<std::string, std::string> artifacts;
  for (const auto& artifact : task.at("execution").at("artifacts"))
    artifacts[artifact.at("key")] = upload_of(imported, artifact.at("uri")).at("sha256");
  CHECK(artifacts == std::map<std::string, std::string>{{"config", sha256_of(run / "config.yaml")},
                                                        {"report", sha256_of(run / "report.html")}});
  // The console says how the run ended.
  const auto logs = events_of_type(imported, "log");
  REQUIRE_FALSE(logs.empty());
  CHECK(logs.back().at("msg") == "oml-cpp: the run ended FINISHED");
}

TEST_CASE("A resumed run continues its ClearML session: one task, each step once", "[clearml][integration]") {
  TempDir dir;
  {
    const auto r = train(dir, "", "--set max_epochs=1");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const fs::path run = dir / "logs" / "run";
  const fs::path folder = session(run);
  const std::string id = folder.filename().string();
  // A process resumed at step 3 and killed after logging two more steps (no end, no zip).
  oml::test::log_as_killed_process<oml::report::ClearmlOfflineTask>(run, id);
  CHECK_FALSE(fs::exists(folder.string() + ".zip"));  // the first process's, out of date
  const auto r = train(dir, "", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(session(run) == folder);  // the same session, appended to
  const nlohmann::json imported = import_with_clearml(folder.string() + ".zip");
  check_scalars_match_logs(imported, run);
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").resume->logger_run_id == "clearml:" + id);
}

TEST_CASE("A failed run's ClearML session still imports and its console says how it ended",
          "[clearml][integration]") {
  TempDir dir;
  const auto r = train(dir, "", "--set 'optimizer={name: sgd, args: {lr: 1.0e+30}}' --set max_epochs=3");
  CHECK(r.exit_code == 1);
  const fs::path folder = session(dir / "logs" / "run");
  CHECK(fs::exists(folder.string() + ".zip"));
  const auto logs = events_of_type(import_with_clearml(folder), "log");  // the folder imports too
  REQUIRE_FALSE(logs.empty());
  CHECK(logs.back().at("msg") == "oml-cpp: the run ended FAILED");
  CHECK(logs.back().at("level") == "error");
}

// The session's end runs in the interrupt's cleanup (an io::InterruptHook), where writing its zip
// through io::write_stream_atomic waited for the cleanup itself: the command hung for good.
TEST_CASE("An interrupted run's ClearML session ends and imports, and the command exits 130 or 143",
          "[clearml][integration]") {
  for (const auto& [signal, code] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    DYNAMIC_SECTION("SIG" << signal << ": exit code " << code) {
      TempDir dir;
      const auto r = oml::test::interrupt_training(dir, kLogger, signal);
      INFO(r.err);
      CHECK_THAT(r.out, EndsWith("status=" + std::to_string(code) + "\n"));
      const fs::path folder = session(dir / "logs" / "run");
      CHECK(fs::exists(folder.string() + ".zip"));
      const auto logs = events_of_type(import_with_clearml(folder), "log");
      REQUIRE_FALSE(logs.empty());
      CHECK(logs.back().at("msg") == "oml-cpp: the run ended KILLED");
    }
  }
}

TEST_CASE("The clearml logger's args are checked with the config", "[clearml][integration]") {
  TempDir dir;
  const auto r =
      oml::test::train_with_logger(dir, "logger: {name: clearml, args: {task_type: learning}}\n", "");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("logger.args.task_type") && Contains("training"));
  CHECK_FALSE(fs::exists(dir / "logs" / "run"));
}

}  // namespace clearml_tests
