// `logger: wandb` writes an offline W&B run that W&B's own reader reads back (the wandb package's
// DataStore and Record protobuf, tests/python/wandb_run_reader.py, and `wandb sync --view`):
// its history is train.jsonl and metrics.jsonl step for step, a resumed run continues the same
// W&B run with each step once, and the exit record says how the run ended.
#include "oml/io/checkpoint.h"
#include "oml/report/wandb_run.h"
#include "tracker_fixtures.h"

namespace wandb_tests {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using oml::test::quote;
using oml::test::read_jsonl;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

const std::string kLogger =
    "logger: {name: wandb, args: {project: oml-tests, entity: team, name: first try, tags: [a, b], notes: "
    "some "
    "notes, group: g1, job_type: train, log_model: true}}\n";

oml::test::CommandResult train(const TempDir& dir, const std::string& extra, const std::string& args = "") {
  return oml::test::train_with_logger(dir, kLogger, extra, args);
}

fs::path offline_run(const fs::path& run) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(run / "wandb")) found.push_back(entry.path());
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0].filename().string(), Contains("offline-run-"));
  return found[0];
}

nlohmann::json read_with_wandb(const fs::path& folder) {
  const auto r = oml::test::run(oml::test::python() + " " +
                                quote(oml::test::source_path("tests/python/wandb_run_reader.py")) + " " +
                                quote(folder.string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// Every number of train.jsonl and metrics.jsonl is in the history row of its step, with the same
// value; the rows' steps are these steps, each once, in order.
void check_history_matches_logs(const nlohmann::json& history, const fs::path& run) {
  std::map<int64_t, nlohmann::json> expected;
  for (const auto& record : read_jsonl(run / "train.jsonl")) {
    for (const auto& item : record.items()) {
      if (item.key() == "epoch" || item.key() == "step" || !item.value().is_number()) continue;
      expected[record.at("step").get<int64_t>()]["train/" + item.key()] = item.value();
    }
  }
  for (const auto& record : read_jsonl(run / "metrics.jsonl")) {
    for (const auto& item : record.at("metrics").items())
      expected[record.at("step").get<int64_t>()][item.key()] = item.value();
  }
  REQUIRE(history.size() == expected.size());
  auto want = expected.begin();
  for (const auto& row : history) {
    INFO("step " << row.at("step"));
    CHECK(row.at("step").get<int64_t>() == want->first);
    const auto& values = row.at("values");
    CHECK(values.at("_step") == want->first);
    CHECK(values.at("trainer/global_step") == want->first);
    for (const auto& item : want->second.items()) {
      INFO(item.key());
      REQUIRE(values.contains(item.key()));
      CHECK(values.at(item.key()).get<double>() == item.value().get<double>());
    }
    ++want;
  }
}

std::vector<std::string> file_paths(const nlohmann::json& run) {
  std::vector<std::string> paths;
  for (const auto& f : run.at("files")) paths.push_back(f.at("path"));
  return paths;
}

}  // namespace

TEST_CASE("logger: wandb writes an offline run that W&B reads: run, config, history, files, exit",
          "[wandb][integration]") {
  TempDir dir;
  const auto r = train(dir, "log_images: true\ntags: [mine]\npostfix: exp\n");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  const fs::path folder = offline_run(run);
  // One line says where the run is and how to upload it.
  CHECK_THAT(r.err, Contains("wandb sync " + folder.string()));

  const nlohmann::json logged = read_with_wandb(folder);
  REQUIRE(logged.at("runs").size() == 1);
  const auto& info = logged.at("runs")[0];
  const std::string id = info.at("run_id");
  CHECK(id.size() == 8);
  CHECK(folder.filename().string().size() > id.size());
  CHECK_THAT(folder.filename().string(), EndsWith("-" + id));
  CHECK(fs::exists(folder / ("run-" + id + ".wandb")));
  CHECK(info.at("stream_id") == id);
  CHECK(info.at("project") == "oml-tests");
  CHECK(info.at("entity") == "team");
  CHECK(info.at("display_name") == "first try");
  CHECK(info.at("notes") == "some notes");
  CHECK(info.at("group") == "g1");
  CHECK(info.at("job_type") == "train");
  CHECK(info.at("resumed") == false);
  // OML's tags (the config's, the postfix, the run folder), then the logger's.
  CHECK(info.at("tags") == nlohmann::json({"mine", "exp", "run", "a", "b"}));
  // The resolved config, flattened with "|" as OML logs it, values typed.
  const auto& config = info.at("config");
  CHECK(config.at("optimizer|name") == "adam");
  CHECK(config.at("optimizer|args|lr") == 0.001);
  CHECK(config.at("max_epochs") == 2);
  CHECK(config.at("metric_args|cmc_top_k") == nlohmann::json({1, 5}));
  CHECK(config.at("dir") == "run");

  check_history_matches_logs(logged.at("history"), run);
  // The summary holds the last values.
  const auto metrics = read_jsonl(run / "metrics.jsonl");
  CHECK(logged.at("summary").at("OVERALL/cmc/1") == metrics.back().at("metrics").at("OVERALL/cmc/1"));
  CHECK(logged.at("summary").at("_step") == 6);
  // The worst-query grid of each validation is a media file the row points at.
  const auto& last_row = logged.at("history").back().at("values");
  REQUIRE(last_row.contains("retrieval/worst_cmc_1"));
  const auto& image = last_row.at("retrieval/worst_cmc_1");
  CHECK(image.at("_type") == "image-file");
  CHECK(fs::file_size(folder / "files" / image.at("path").get<std::string>()) == image.at("size"));

  const auto paths = file_paths(logged);
  for (const char* name :
       {"oml/config.yaml", "oml/report.html", "oml/checkpoints/last.ckpt", "oml/checkpoints/best.ckpt"}) {
    INFO(name);
    CHECK(std::count(paths.begin(), paths.end(), name) == 1);
    CHECK(fs::exists(folder / "files" / name));
  }
  CHECK(oml::test::read_file(folder / "files" / "oml" / "config.yaml") ==
        oml::test::read_file(run / "config.yaml"));
  // The final checkpoint is the run file itself (a hard link: no copy on the training thread).
  CHECK(fs::equivalent(folder / "files" / "oml" / "checkpoints" / "last.ckpt",
                       run / "checkpoints" / "last.ckpt"));
  CHECK(logged.at("exits") == nlohmann::json({0}));
  CHECK(logged.at("record_types").back() == "final");
  // Records are numbered 1, 2, 3, ...
  const auto& nums = logged.at("nums");
  for (std::size_t i = 0; i < nums.size(); ++i) CHECK(nums[i] == static_cast<int64_t>(i + 1));

  // W&B's command line reads it too: what `wandb sync` would upload, record by record.
  const std::string fake_key(40, 'x');  // --view reads nothing remote, but wants a key set
  const fs::path wandb_cli = fs::path(OML_PYTHON).parent_path() / "wandb";
  const auto view = oml::test::run("WANDB_API_KEY=" + fake_key + " " + quote(wandb_cli.string()) +
                                   " sync --view --verbose " + quote(folder.string()));
  INFO(view.err);
  CHECK(view.exit_code == 0);
  CHECK_THAT(view.out, Contains("run_id: \"" + id + "\"") && Contains("exit {") && Contains("OVERALL/cmc/1"));
}

TEST_CASE("A resumed run continues its W&B run: one offline run, each step once", "[wandb][integration]") {
  TempDir dir;
  {
    const auto r = train(dir, "", "--set max_epochs=1");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const fs::path run = dir / "logs" / "run";
  const fs::path folder = offline_run(run);
  const std::string id = read_with_wandb(folder).at("runs")[0].at("run_id");
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").resume->logger_run_id == "wandb:" + id);
  // A process resumed at step 3 and killed after logging two more steps (no exit record).
  oml::test::log_as_killed_process<oml::report::WandbOfflineRun>(run, id);
  const auto r = train(dir, "", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(offline_run(run) == folder);  // the same offline run, appended to
  const nlohmann::json logged = read_with_wandb(folder);
  REQUIRE(logged.at("runs").size() == 1);
  CHECK(logged.at("runs")[0].at("run_id") == id);
  // The killed process's rows (and the first process's exit) are gone; steps 1..6 once each.
  check_history_matches_logs(logged.at("history"), run);
  CHECK(logged.at("exits") == nlohmann::json({0}));
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").resume->logger_run_id == "wandb:" + id);
}

TEST_CASE("A W&B run ends with the exit code of how training ended", "[wandb][integration]") {
  TempDir dir;
  SECTION("a failure: exit code 1") {
    const auto r = train(dir, "", "--set 'optimizer={name: sgd, args: {lr: 1.0e+30}}' --set max_epochs=3");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("loss became"));
    CHECK(read_with_wandb(offline_run(dir / "logs" / "run")).at("exits") == nlohmann::json({1}));
  }
  // Ctrl-C and SIGTERM (a scheduler's stop): the run's exit code is the process's, 128 + signal.
  for (const auto& [signal, code] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    DYNAMIC_SECTION("SIG" << signal << ": exit code " << code << ", the steps logged so far kept") {
      const auto r = oml::test::interrupt_training(dir, kLogger, signal);
      CHECK_THAT(r.out, EndsWith("status=" + std::to_string(code) + "\n"));
      const nlohmann::json logged = read_with_wandb(offline_run(dir / "logs" / "run"));
      CHECK(logged.at("exits") == nlohmann::json({code}));
      CHECK(logged.at("history").size() >= 3);  // at least the first epoch's steps
    }
  }
}

TEST_CASE("The wandb logger's args are checked with the config", "[wandb][integration]") {
  TempDir dir;
  write_file(
      dir / "train.yaml",
      oml::test::train_config(dir / "logs", "logger: {name: wandb, args: {projekt: x, mode: cloud}}\n"));
  const auto r = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("logger.args.projekt") && Contains("did you mean 'project'"));
  CHECK_FALSE(fs::exists(dir / "logs" / "run"));
}

}  // namespace wandb_tests
