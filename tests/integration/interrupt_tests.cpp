// Ctrl-C and SIGTERM end a command cleanly: one line on stderr, exit 128 + signal, and none of
// the files it had begun (checkpoint temporaries, a conversion's staging folder) left behind.
#include <algorithm>

#include "oml/io/checkpoint.h"
#include "oml/io/npy.h"
#include "pipeline_fixtures.h"

namespace interrupt_tests {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using oml::test::command_path;
using oml::test::quote;
using oml::test::run;
using oml::test::TempDir;
using oml::test::write_file;

namespace {

// Starts `command` in the background (with job control, so that a non-interactive shell does not
// make it ignore SIGINT), waits until `ready` (a shell test) holds, sends `signal` and prints the
// command's exit status last.
oml::test::CommandResult interrupt_when(const std::string& command, const std::string& ready,
                                        const std::string& signal) {
  const std::string script = "set -m; " + command + " & pid=$!; " + "for i in $(seq 1200); do if " + ready +
                             "; then break; fi; sleep 0.05; done; " + "kill -" + signal +
                             " $pid; wait $pid; echo status=$?";
  return run("bash -c " + quote(script), 120);
}

// Every leftover temporary ("<name>.tmp-<pid>-<n>") below `folder`.
std::vector<std::string> temporaries_below(const fs::path& folder) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(entry.path());
  }
  return found;
}

}  // namespace

TEST_CASE("SIGTERM during a conversion removes its staging folder and exits 143", "[interrupt][convert]") {
  TempDir dir;
  const fs::path dst = dir / "fmnist";
  // The whole packaged Fashion-MNIST on one thread takes seconds: the signal lands mid-way.
  const std::string command = quote(command_path("oml-convert")) +
                              " fashion-mnist --src /usr/share/datasets/fashion-mnist --dst " +
                              quote(dst.string()) + " --threads 1 --progress quiet";
  const std::string staging_has_images =
      "[ -n \"$(find " + quote(dir.path().string()) + " -path '*.tmp-*/images/*.png' -print -quit)\" ]";
  const auto r = interrupt_when(command, staging_has_images, "TERM");
  CHECK_THAT(r.out, EndsWith("status=143\n"));
  CHECK_THAT(r.err, Contains("oml-convert: interrupted by signal 15 (SIGTERM); removed 1 unfinished file"));
  CHECK(temporaries_below(dir.path()).empty());
  CHECK(!fs::exists(dst));
}

TEST_CASE("Ctrl-C during oml-index build removes the folder it was making and exits 130",
          "[interrupt][serving]") {
  TempDir dir;
  oml::io::write_npy(dir / "g.npy", torch::randn({50, 8}));
  const fs::path out = dir / "index";
  // Paused before items.csv is renamed into the version being written.
  const std::string command = "OML_FAILPOINTS=before_rename:items.csv=pause:20 " +
                              quote(command_path("oml-index")) + " build --embeddings " +
                              quote((dir / "g.npy").string()) + " --out " + quote(out.string());
  const std::string writing =
      "[ -n \"$(find " + quote(out.string()) + " -name 'items.csv.tmp-*' -print -quit)\" ]";
  const auto r = interrupt_when(command, writing, "INT");
  CHECK_THAT(r.out, EndsWith("status=130\n"));
  CHECK_THAT(r.err, Contains("oml-index: interrupted by signal 2 (SIGINT); removed"));
  CHECK_FALSE(fs::exists(out));  // v000001.tmp-* and .lock were left before
}

TEST_CASE("Ctrl-C during training exits 130 and leaves whole checkpoints and no temporaries",
          "[interrupt][train]") {
  TempDir dir;
  write_file(dir / "train.yaml", oml::test::train_config(dir / "logs"));
  const fs::path run_dir = dir / "logs" / "run";
  const std::string command = quote(command_path("oml-train")) + " --config " +
                              quote((dir / "train.yaml").string()) +
                              " --set max_epochs=1000 --progress quiet";
  const auto r = interrupt_when(
      command, "[ -f " + quote((run_dir / "checkpoints" / "last.ckpt").string()) + " ]", "INT");
  CHECK_THAT(r.out, EndsWith("status=130\n"));
  CHECK_THAT(r.err, Contains("oml-train: interrupted by signal 2 (SIGINT); removed"));
  CHECK(temporaries_below(run_dir).empty());
  CHECK_FALSE(fs::exists(run_dir / ".lock"));  // removed at the end of the run, as by a normal one
  // What the run had finished is whole (every record's CRC is checked on load).
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints")) {
    INFO(entry.path());
    CHECK(oml::io::load_checkpoint(entry.path()).step > 0);
  }
}

TEST_CASE("SIGTERM mid-epoch finishes the step, writes last.ckpt there, and a resume continues exactly",
          "[interrupt][train][resume]") {
  TempDir dir;
  // 200 one-batch epochs validated only at the end: without the signal's checkpoint, nothing
  // would be written before the end.
  const std::string long_run = "--set sampler.args.epoch_size=1 --set max_epochs=200 --set valid_period=200";
  write_file(dir / "full.yaml", oml::test::train_config(dir / "full"));
  write_file(dir / "part.yaml", oml::test::train_config(dir / "part"));
  REQUIRE(oml::test::run_oml("oml-train", "--config " + quote((dir / "full.yaml").string()) + " " + long_run)
              .exit_code == 0);

  const fs::path run_dir = dir / "part" / "run";
  const fs::path log = run_dir / "train.jsonl";
  const std::string command = quote(command_path("oml-train")) + " --config " +
                              quote((dir / "part.yaml").string()) + " " + long_run + " --progress quiet";
  const auto r = interrupt_when(
      command, "[ -f " + quote(log.string()) + " ] && [ $(wc -l < " + quote(log.string()) + ") -ge 3 ]",
      "TERM");
  CHECK_THAT(r.out, EndsWith("status=143\n"));
  CHECK_THAT(r.err,
             Contains("oml-train: interrupted by signal 15 (SIGTERM); finishing the step or validation "
                      "under way, then writing last.ckpt") &&
                 Contains("oml-train: interrupted by signal 15 (SIGTERM); removed 0 unfinished files"));
  CHECK(temporaries_below(run_dir).empty());
  CHECK_FALSE(fs::exists(run_dir / ".lock"));
  const auto steps = oml::test::read_file(log);
  const auto trained = std::count(steps.begin(), steps.end(), '\n');
  REQUIRE(trained < 200);  // the signal landed mid-run
  const auto last = oml::io::load_checkpoint(run_dir / "checkpoints" / "last.ckpt");
  CHECK(last.step == trained);  // every step the log holds, none lost

  const auto resumed = oml::test::run_oml(
      "oml-train", "--config " + quote((dir / "part.yaml").string()) + " " + long_run + " --resume " +
                       quote((run_dir / "checkpoints" / "last.ckpt").string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  oml::test::check_same_training_log(dir / "full" / "run" / "train.jsonl", log, "step");
}

}  // namespace interrupt_tests
