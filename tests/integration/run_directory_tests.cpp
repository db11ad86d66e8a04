// A run directory belongs to one run: a new run never writes into an existing one, --resume
// only continues a run in its own directory from its latest state, two processes never write
// one directory, and a resumed run's logs hold every step once.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "oml/report/tensorboard_writer.h"
#include "support/support.h"

namespace run_directory_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

oml::test::CommandResult train(const fs::path& config, const std::string& args = "") {
  return run_oml("oml-train", "--config " + quote(config.string()) + " " + args);
}

}  // namespace

TEST_CASE("A run directory belongs to one run, and --resume continues only a run's last.ckpt",
          "[pipelines][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  const auto first = train(dir / "train.yaml", "--set max_epochs=1");
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  const std::string best = read_file(run / "checkpoints" / "best.ckpt");
  const std::string last = read_file(run / "checkpoints" / "last.ckpt");
  const std::string log = read_file(run / "train.jsonl");
  auto untouched = [&] {
    CHECK(read_file(run / "checkpoints" / "best.ckpt") == best);
    CHECK(read_file(run / "checkpoints" / "last.ckpt") == last);
    CHECK(read_file(run / "train.jsonl") == log);
  };

  SECTION("every checkpoint carries the best value so far") {
    const auto checkpoint = oml::io::load_checkpoint(run / "checkpoints" / "best.ckpt");
    CHECK(checkpoint.metrics.count("best/OVERALL/cmc/1") == 1);
  }
  SECTION("the same run_name again is refused, naming the directory") {
    const auto again = train(dir / "train.yaml");
    CHECK(again.exit_code == 2);
    CHECK_THAT(again.err, Contains(run.string()) && Contains("already exists") && Contains("--resume"));
    untouched();
  }
  SECTION("a new run starts from a run's checkpoint given as the top-level weights:") {
    write_file(dir / "next.yaml", train_config(dir / "next"));
    const auto missing = train(dir / "next.yaml",
                               "--set max_epochs=1 --set weights=" + quote((dir / "no_such.ckpt").string()));
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Contains("weights") && Contains("no_such.ckpt' does not exist"));
    const auto started = train(dir / "next.yaml", "--set max_epochs=1 --set weights=" +
                                                      quote((run / "checkpoints" / "last.ckpt").string()));
    INFO(started.err);
    REQUIRE(started.exit_code == 0);
    CHECK_THAT(started.out + started.err,
               Contains("loaded extractor weights from " + (run / "checkpoints" / "last.ckpt").string()));
    // It starts where the first run ended: its first loss is not the first run's first loss.
    const auto first_line = [](const std::string& jsonl) {
      return nlohmann::json::parse(jsonl.substr(0, jsonl.find('\n'))).at("loss").get<double>();
    };
    CHECK(first_line(read_file(dir / "next" / "run" / "train.jsonl")) != first_line(log));
    untouched();
  }
  SECTION("a run that stopped before its first checkpoint is named as such, not offered to --resume") {
    fs::remove_all(run / "checkpoints");
    fs::create_directory(run / "checkpoints");
    const auto again = train(dir / "train.yaml");
    CHECK(again.exit_code == 2);
    CHECK_THAT(again.err, Contains("stopped before its first checkpoint") && !Contains("--resume"));
    const auto resumed =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
    CHECK(resumed.exit_code == 2);
    CHECK_THAT(resumed.err, Contains("has no last.ckpt: it stopped before its first checkpoint"));
    CHECK(read_file(run / "train.jsonl") == log);
  }
  SECTION("a checkpoint outside a run directory is not resumed into its folders") {
    // The user's own project folder: proj/ckpts/model.ckpt beside proj/config.yaml.
    fs::create_directories(dir / "proj" / "ckpts");
    fs::copy_file(run / "checkpoints" / "last.ckpt", dir / "proj" / "ckpts" / "model.ckpt");
    write_file(dir / "proj" / "config.yaml", "mine: true\n");
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((dir / "proj" / "ckpts" / "model.ckpt").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("not a checkpoint of an oml-train run directory") && Contains("weights"));
    CHECK(read_file(dir / "proj" / "config.yaml") == "mine: true\n");
    CHECK_FALSE(fs::exists(dir / "proj" / "metrics.jsonl"));
    CHECK_FALSE(fs::exists(dir / "proj" / "train.jsonl"));
  }
  SECTION("best.ckpt is an earlier state: resuming from it is refused") {
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "best.ckpt").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("last.ckpt") && Contains("roll the run back"));
    untouched();
  }
  SECTION("resuming with another optimizer is refused, naming both") {
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()) +
                                      " --set 'optimizer={name: sgd, args: {lr: 0.1}}'");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("optimizer") && Contains("'adam'") && Contains("'sgd'"));
    CHECK_THAT(r.err, !Contains("INTERNAL ASSERT"));
    untouched();
  }
  SECTION("a second process cannot write a run directory in use") {
    const int fd = ::open((run / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
    ::close(fd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("in use by another process"));
    untouched();
  }
  SECTION("a .lock that is a link is refused, and what it points to is untouched") {
    write_file(dir / "passwd", "root:x:0:0\n");
    fs::remove(run / ".lock");
    fs::create_symlink(dir / "passwd", run / ".lock");
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(".lock' is a symbolic link"));
    CHECK(read_file(dir / "passwd") == "root:x:0:0\n");
    untouched();
  }
  SECTION("resuming removes the temporaries a killed process left, and only those") {
    // pid 4194304 is above Linux's largest pid: no live process has it.
    write_file(run / "checkpoints" / "last.ckpt.tmp-4194304-3", "half a checkpoint");
    write_file(run / "config.yaml.tmp-4194304-0", "half a config");
    // A resume killed while it cut an event file back (TensorBoard reads any "*tfevents*").
    const auto event_files = oml::report::find_event_files(run / "tensorboard");
    REQUIRE(event_files.size() == 1);
    const fs::path event_tmp = event_files[0].string() + ".tmp-4194304-2";
    write_file(event_tmp, "half an event file");
    CHECK(oml::report::find_event_files(run / "tensorboard").size() == 1);
    const std::string live = "last.ckpt.tmp-" + std::to_string(::getpid()) + "-0";  // this test is alive
    write_file(run / "checkpoints" / live, "someone else's");
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(fs::exists(run / "checkpoints" / "last.ckpt.tmp-4194304-3"));
    CHECK_FALSE(fs::exists(run / "config.yaml.tmp-4194304-0"));
    CHECK(fs::exists(run / "checkpoints" / live));
    CHECK_FALSE(fs::exists(event_tmp));
  }
  SECTION("resuming keeps config.yaml, records the new config beside it and warns what changed") {
    const std::string config_before = read_file(run / "config.yaml");
    // What a run killed after its checkpoint had logged: two steps past it and a cut line.
    {
      std::ofstream out(run / "train.jsonl", std::ios::app);
      out << "{\"epoch\": 1, \"step\": 4, \"loss\": 1.0}\n{\"epoch\": 1, \"step\": 5, \"loss\": 1.0}\n{\"epo";
    }
    {
      // A resumed process, killed after logging two steps past the checkpoint: a second file.
      oml::report::TensorBoardWriter killed(run / "tensorboard", 3);
      killed.log_scalar("train/loss", 9.0, 4);
      killed.log_scalar("train/loss", 9.0, 5);
    }
    const auto r =
        train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()) +
                                      " --set optimizer.args.lr=0.5");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_file(run / "config.yaml") == config_before);
    CHECK(fs::exists(run / "config.resume-1.yaml"));
    CHECK_THAT(r.err, Contains("max_epochs: 1 -> 2"));
    CHECK_THAT(
        r.err,
        Contains("optimizer.args.lr: 0.001 -> 0.5 (not applied: the optimizer's and scheduler's state"));
    const auto steps = read_jsonl(run / "train.jsonl");
    REQUIRE(steps.size() == 6);  // 2 epochs x 3 steps, each once
    for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].at("step") == static_cast<int>(i + 1));
    CHECK(steps.back().at("lr").get<double>() == Approx(steps.front().at("lr").get<double>()));  // not 0.5
    CHECK(read_jsonl(run / "metrics.jsonl").size() == 2);
    // TensorBoard: each step once over all files, the killed process's later values gone, and the
    // resumed file starts with a restart marker at the first step it trains.
    std::map<int64_t, int> loss_steps;
    const auto files = oml::report::find_event_files(run / "tensorboard");
    for (const auto& file : files) {
      for (const auto& event : oml::report::read_event_file(file)) {
        if (event.tag == "train/loss") ++loss_steps[event.step];
        if (event.tag == "train/loss" && event.step > 3) CHECK(*event.scalar != 9.0);
      }
    }
    CHECK(loss_steps.size() == 6);
    for (const auto& [step, count] : loss_steps) CHECK(count == 1);
    bool marker = false;
    for (const auto& event : oml::report::read_event_file(files.back())) {
      marker = marker || (event.session_start && event.step == 4);
    }
    CHECK(marker);
    CHECK_FALSE(fs::exists(run / ".lock"));  // released and removed at the end of the run
  }
}

TEST_CASE("Runs started in the same second without a run_name get directories of their own",
          "[pipelines][integration]") {
  TempDir dir;
  std::string config = train_config(dir / "logs", "max_steps: 1\n");
  config.erase(config.find("run_name: run\n"), std::string("run_name: run\n").size());
  write_file(dir / "train.yaml", config);
  const std::string one = command_path("oml-train") + " --config " + quote((dir / "train.yaml").string());
  const auto both =
      run("(" + one + " >/dev/null 2>&1; echo a$?) & (" + one + " >/dev/null 2>&1; echo b$?) & wait");
  CHECK_THAT(both.out, Contains("a0") && Contains("b0"));
  std::size_t runs = 0;
  for (const auto& entry : fs::directory_iterator(dir / "logs")) runs += entry.is_directory() ? 1 : 0;
  CHECK(runs == 2);
}

TEST_CASE("A logs_root that is a link to nothing is refused before the run", "[pipelines][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  fs::create_directory_symlink(dir / "nowhere", dir / "logs");
  const auto r = train(dir / "train.yaml");
  CHECK(r.exit_code == 2);  // was exit 1, "File exists"
  CHECK_THAT(r.err, Contains("logs_root '" + (dir / "logs").string() + "' is a link to nothing"));
  CHECK_FALSE(fs::exists(dir / "nowhere"));
}

TEST_CASE("A report that cannot be written is a warning: training goes on and checkpoints are written",
          "[pipelines][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  REQUIRE(train(dir / "train.yaml", "--set max_epochs=1").exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  // report.html replaced by a folder: every write of the report fails.
  fs::remove(run / "report.html");
  fs::create_directory(run / "report.html");
  const auto resumed =
      train(dir / "train.yaml", "--resume " + quote((run / "checkpoints" / "last.ckpt").string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err, Contains("writing report.html failed") && Contains("training goes on"));
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").step == 6);
  CHECK(read_jsonl(run / "metrics.jsonl").size() == 2);
}

}  // namespace run_directory_tests
