// `logger: neptune` writes an offline Neptune run that the neptune client's own sync uploads: the
// run is synced with SyncRunner.sync_all_offline (what `neptune sync --offline-only` runs) into the
// client's in-memory backend (tests/python/neptune_offline_reader.py), and what the run then
// holds is checked against train.jsonl, metrics.jsonl, the config and the run's files. A resumed
// run continues the same offline run with each step once, and the run's end is its status.
#include "oml/common/sha256.h"
#include "oml/io/checkpoint.h"
#include "oml/report/neptune_run.h"
#include "tracker_fixtures.h"

namespace neptune_tests {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using oml::test::quote;
using oml::test::read_jsonl;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kProject = "oml-team/test";
const std::string kLogger = "logger: {name: neptune, args: {project: " + kProject +
                            ", name: first try, description: some notes, tags: [a, b]}}\n";

oml::test::CommandResult train(const TempDir& dir, const std::string& extra, const std::string& args = "") {
  return oml::test::train_with_logger(dir, kLogger, extra, args);
}

fs::path offline_run(const fs::path& run) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(run / ".neptune" / "offline"))
    found.push_back(entry.path());
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0].filename().string(), StartsWith("run__"));
  return found[0];
}

// The run's uuid: the offline folder's name is run__<uuid>__<pid>__<key>.
std::string run_uuid(const fs::path& folder) {
  const std::string name = folder.filename().string();
  const std::size_t start = std::string("run__").size();
  return name.substr(start, name.find("__", start) - start);
}

nlohmann::json sync_with_neptune(const fs::path& run) {
  const auto r = oml::test::run(oml::test::python() + " " +
                                quote(oml::test::source_path("tests/python/neptune_offline_reader.py")) +
                                " " + quote(run.string()) + " " + kProject);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto synced = nlohmann::json::parse(r.out);
  // One run, every operation applied without a complaint, nothing left to sync.
  CHECK(synced.at("runs") == 1);
  CHECK(synced.at("errors") == nlohmann::json::array());
  CHECK(synced.at("left_offline") == 0);
  return synced;
}

// Every value of train.jsonl and metrics.jsonl is in the series training/<key> at its step, each
// step once, in order.
void check_series_match_logs(const nlohmann::json& series, const fs::path& run) {
  std::map<std::pair<std::string, int64_t>, double> got;
  for (const auto& [path, values] : series.items()) {
    if (path.rfind("training/", 0) != 0) continue;
    int64_t previous = 0;
    for (const auto& value : values) {
      INFO(path << " at " << value[0]);
      CHECK(value[0].get<int64_t>() > previous);  // Neptune's steps only grow
      previous = value[0].get<int64_t>();
      got[{path.substr(std::string("training/").size()), previous}] = value[1].get<double>();
    }
  }
  const auto expected = oml::test::logged_values(run);
  REQUIRE(expected.count({"OVERALL/cmc/1", 6}) == 1);
  CHECK(got == expected);
}

std::string sha256_of(const fs::path& file) { return oml::sha256_file_hex(file); }

}  // namespace

TEST_CASE(
    "logger: neptune writes an offline run that `neptune sync` uploads: name, tags, hyperparams, "
    "series, images, files, status",
    "[neptune][integration]") {
  TempDir dir;
  const auto r = train(dir, "log_images: true\ntags: [mine]\npostfix: exp\n");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  const fs::path folder = offline_run(run);
  const std::string id = run_uuid(folder);
  CHECK(id.size() == 36);
  // One line says where the run is and how to upload it.
  CHECK_THAT(r.err, Contains("neptune sync --path " + run.string() + " --project " + kProject +
                             " --object offline/" + id));
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").resume->logger_run_id == "neptune:" + id);

  const nlohmann::json synced = sync_with_neptune(run);
  const auto& attributes = synced.at("attributes");
  CHECK(attributes.at("sys/name") == "first try");
  CHECK(attributes.at("sys/description") == "some notes");
  // The logger's tags, then OML's: the config's, the postfix, the run folder.
  CHECK(attributes.at("sys/tags") == nlohmann::json({"a", "b", "exp", "mine", "run"}));
  CHECK(attributes.at("sys/failed") == false);
  CHECK(attributes.at("training/status") == "success");
  // The config flattened with "|" under Lightning's training/hyperparams, typed as
  // stringify_unsupported types it: numbers and strings as themselves, lists as Python's str().
  CHECK(attributes.at("training/hyperparams/optimizer|name") == "adam");
  CHECK(attributes.at("training/hyperparams/optimizer|args|lr") == 0.001);
  CHECK(attributes.at("training/hyperparams/max_epochs") == 2);
  CHECK(attributes.at("training/hyperparams/metric_args|cmc_top_k") == "[1, 5]");
  CHECK(attributes.at("training/hyperparams/extractor|args|channels") == "[8, 16, 16]");
  CHECK(attributes.at("training/hyperparams/tags") == "['mine']");
  CHECK(attributes.at("training/hyperparams/dir") == "run");

  check_series_match_logs(synced.at("series"), run);
  // The worst-query grid of each validation, at the validation's step, byte for byte.
  const auto metrics = read_jsonl(run / "metrics.jsonl");
  const auto& images = synced.at("images").at("retrieval/worst_cmc_1");
  REQUIRE(images.size() == metrics.size());
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    CHECK(images[i][0] == metrics[i].at("step"));
    CHECK(images[i][2] == sha256_of(oml::test::grid_file(run, i + 1)));
  }
  // The files, as they are at the end of the run; the checkpoints where Lightning puts them.
  const auto& files = synced.at("files");
  CHECK(files.at("oml/config").at("ext") == "yaml");
  CHECK(files.at("oml/config").at("sha256") == sha256_of(run / "config.yaml"));
  CHECK(files.at("oml/report").at("sha256") == sha256_of(run / "report.html"));
  for (const char* name : {"last", "best"}) {
    INFO(name);
    const auto& checkpoint = files.at(std::string("training/model/checkpoints/") + name);
    CHECK(checkpoint.at("ext") == "ckpt");
    CHECK(checkpoint.at("sha256") == sha256_of(run / "checkpoints" / (std::string(name) + ".ckpt")));
  }
  CHECK(attributes.at("training/model/best_model_path") ==
        fs::absolute(run / "checkpoints" / "best.ckpt").string());
  // The final checkpoint is the run's file itself (a hard link: no copy on the training thread).
  CHECK(fs::equivalent(folder / "upload_path" / "training_model_checkpoints_last.ckpt",
                       run / "checkpoints" / "last.ckpt"));
  // The queue's bookkeeping, as the client keeps it: last_put_version is the last version.
  const auto lines = oml::test::read_file(folder / "data-1.log");
  const auto last_put = std::stoll(oml::test::read_file(folder / "last_put_version"));
  CHECK(last_put == static_cast<int64_t>(std::count(lines.begin(), lines.end(), '\n')));
  CHECK(synced.at("operations") == last_put);
}

TEST_CASE("A resumed run continues its Neptune run: one offline run, each step once",
          "[neptune][integration]") {
  TempDir dir;
  {
    const auto r = train(dir, "", "--set max_epochs=1");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const fs::path run = dir / "logs" / "run";
  const fs::path folder = offline_run(run);
  const std::string id = run_uuid(folder);
  // A process resumed at step 3 and killed after logging two more steps (no status).
  oml::test::log_as_killed_process<oml::report::NeptuneOfflineRun>(run, id);
  const auto r = train(dir, "", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(offline_run(run) == folder);  // the same offline run, appended to
  const nlohmann::json synced = sync_with_neptune(run);
  // The killed process's values are gone (Neptune would refuse steps 4 and 5 twice); 1..6 once.
  check_series_match_logs(synced.at("series"), run);
  CHECK(synced.at("attributes").at("training/status") == "success");
  CHECK(synced.at("attributes").at("sys/failed") == false);
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").resume->logger_run_id == "neptune:" + id);
}

TEST_CASE("A Neptune run ends with the status of how training ended", "[neptune][integration]") {
  TempDir dir;
  SECTION("a failure: failed") {
    const auto r = train(dir, "", "--set 'optimizer={name: sgd, args: {lr: 1.0e+30}}' --set max_epochs=3");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("loss became"));
    const auto attributes = sync_with_neptune(dir / "logs" / "run").at("attributes");
    CHECK(attributes.at("training/status") == "failed");
    CHECK(attributes.at("sys/failed") == true);
  }
  SECTION("Ctrl-C: failed, the steps logged so far kept") {
    const auto r = oml::test::interrupt_training(dir, kLogger, "INT");
    CHECK_THAT(r.out, EndsWith("status=130\n"));
    const auto synced = sync_with_neptune(dir / "logs" / "run");
    CHECK(synced.at("attributes").at("training/status") == "failed");
    CHECK(synced.at("attributes").at("sys/failed") == true);
    CHECK(synced.at("series").at("training/train/loss").size() >= 3);  // at least the first epoch's steps
  }
}

TEST_CASE("The neptune logger's args are checked with the config", "[neptune][integration]") {
  TempDir dir;
  const auto r =
      oml::test::train_with_logger(dir, "logger: {name: neptune, args: {projekt: x, mode: cloud}}\n", "");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("logger.args.projekt") && Contains("did you mean 'project'"));
  CHECK_FALSE(fs::exists(dir / "logs" / "run"));
}

}  // namespace neptune_tests
