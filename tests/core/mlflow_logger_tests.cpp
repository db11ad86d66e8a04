// The mlflow logger without a server (docs/reports.md#mlflow): MLflow's file store layout as
// written, finish() bounded when the server is away, and what a killed run left in pending.jsonl
// sent by the resumed one. tests/integration/mlflow_tests.cpp reads runs back with MLflow's client.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "oml/config/document.h"
#include "oml/registry/registries.h"
#include "oml/report/mlflow_logger.h"
#include "report/mlflow_store.h"  // white box: the store's key rule
#include "shell/components.h"
#include "support/support.h"

namespace mlflow_logger_tests {

using namespace oml;
using Catch::Matchers::Contains;
using oml::test::read_file;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A TCP port nobody listens on (bound, then released).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

report::LoggerContext context_in(const fs::path& run_dir) {
  fs::create_directories(run_dir);
  report::LoggerContext context;
  context.run_dir = run_dir;
  context.run_name = run_dir.filename().string();
  context.tags = {"fmnist"};
  context.config_yaml =
      "max_epochs: 2\ncriterion: {name: arcface, args: {m: 0.4}}\nmetric_args: {cmc_top_k: [1, 5]}\n";
  return context;
}

// The one run folder of the one non-default experiment of a file store.
fs::path only_run(const fs::path& store) {
  std::vector<fs::path> runs;
  for (const auto& experiment : fs::directory_iterator(store)) {
    const std::string name = experiment.path().filename().string();
    if (name == "0" || name == ".trash" || !experiment.is_directory()) continue;
    for (const auto& run : fs::directory_iterator(experiment.path())) {
      if (run.is_directory()) runs.push_back(run.path());
    }
  }
  REQUIRE(runs.size() == 1);
  return runs[0];
}

std::vector<std::string> lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("The mlflow logger writes MLflow's file store: metric lines, params, tags, files and the status",
          "[report][mlflow]") {
  TempDir dir;
  const auto context = context_in(dir / "run1");
  oml::test::write_file(dir / "run1" / "config.yaml", context.config_yaml);
  report::MlflowOptions options;
  options.experiment_name = "unit";
  options.tracking_uri = "file:./ml-runs";  // relative: the run directory
  options.tags = {{"team", "retrieval"}};
  std::string run_id;
  {
    report::MlflowLogger logger(options, context);
    logger.log_scalar("train/loss", 0.5, 1);
    logger.log_scalar("train/loss", 0.25, 2);
    logger.log_scalar("OVERALL/fnmr@fmr/0.1", 3, 2);  // '@' is not an MLflow key character
    logger.log_file(dir / "run1" / "config.yaml", "config.yaml");
    logger.log_file(dir / "run1" / "config.yaml", "checkpoints/last.ckpt");  // log_model: false
    logger.flush();
    logger.finish(report::RunStatus::finished);
    run_id = logger.run_id();
  }
  const fs::path store = dir / "run1" / "ml-runs";
  CHECK(fs::exists(store / "0" / "meta.yaml"));  // MLflow's Default experiment
  const fs::path run = only_run(store);
  CHECK(run.filename() == run_id);
  CHECK(std::regex_match(run_id, std::regex("[0-9a-f]{32}")));

  const auto loss = lines(run / "metrics" / "train" / "loss");
  REQUIRE(loss.size() == 2);
  CHECK(std::regex_match(loss[0], std::regex("[0-9]{13} 0\\.5 1")));
  CHECK(std::regex_match(loss[1], std::regex("[0-9]{13} 0\\.25 2")));
  const auto fnmr = lines(run / "metrics" / "OVERALL" / "fnmrfmr" / "0.1");
  REQUIRE(fnmr.size() == 1);
  CHECK(std::regex_match(fnmr[0], std::regex("[0-9]{13} 3\\.0 2")));  // Python's repr of 3.0

  CHECK(read_file(run / "params" / "max_epochs") == "2");
  CHECK(read_file(run / "params" / "criterion" / "args" / "m") == "0.4");
  CHECK(read_file(run / "params" / "metric_args" / "cmc_top_k") == "[1,5]");
  CHECK(read_file(run / "params" / "dir") == "run1");
  CHECK(read_file(run / "tags" / "fmnist") == "tag");
  CHECK(read_file(run / "tags" / "run1") == "tag");
  CHECK(read_file(run / "tags" / "team") == "retrieval");
  CHECK(read_file(run / "tags" / "mlflow.runName") == "run1");
  CHECK(read_file(run / "artifacts" / "config.yaml") == context.config_yaml);
  CHECK_FALSE(fs::exists(run / "artifacts" / "checkpoints"));

  const std::string meta = read_file(run / "meta.yaml");
  CHECK_THAT(meta, Contains("status: 3") && Contains("run_name: \"run1\"") && Contains("run_id: " + run_id));
  CHECK(std::regex_search(meta, std::regex("end_time: [0-9]{13}")));
  CHECK(std::regex_search(read_file(run.parent_path() / "meta.yaml"), std::regex("name: \"unit\"")));
}

TEST_CASE("A tag key MLflow refuses is an error at its key, and the file store writes no key outside its run",
          "[report][mlflow]") {
  oml::cli::register_builtins();
  TempDir dir;
  oml::test::write_file(dir / "victim.txt", "the user's notes");
  const std::string escape = "../../../../../../../../../../.." + (dir / "victim.txt").string();
  const auto document = oml::config::Document::from_string(
      "c: {name: mlflow, args: {experiment_name: e, tags: {'" + escape + "': pwned}}}\n", "run.yaml");
  const auto spec = oml::config::parse_component(document.root()["c"], "c");
  auto context = context_in(dir / "run1");
  CHECK_THROWS_WITH(oml::registries().loggers.create(spec, context),
                    Contains("run.yaml:1:") && Contains("c.args.tags") && Contains("tag key '" + escape) &&
                        Contains("is not one MLflow accepts"));
  CHECK(read_file(dir / "victim.txt") == "the user's notes");
  for (const std::string key : {"a/b", "mlflow.source.name", "team 1", "x-y_z.0", "team:ml", "команда"})
    CHECK(report::mlflow::is_valid_key(key));
  for (const std::string key :
       {std::string(), std::string("/etc"), std::string("a//b"), std::string("a/./b"), std::string(".."),
        std::string("a/.."), std::string("a\nb"), std::string("a|b"), std::string(251, 'k')})
    CHECK_FALSE(report::mlflow::is_valid_key(key));

  // Past the config (a logger built in code): the store refuses the key instead of writing it.
  report::MlflowOptions options;
  options.experiment_name = "unit";
  options.tracking_uri = "file:./ml-runs";
  options.tags = {{escape, "pwned"}};
  {
    report::MlflowLogger logger(options, context);
    logger.finish(report::RunStatus::finished);
  }
  CHECK(read_file(dir / "victim.txt") == "the user's notes");
}

TEST_CASE("With its server away the mlflow logger starts and finishes within seconds and keeps every value",
          "[report][mlflow]") {
  TempDir dir;
  report::MlflowOptions options;
  options.tracking_uri = "http://127.0.0.1:" + std::to_string(unused_port());
  const auto start = std::chrono::steady_clock::now();
  report::MlflowLogger logger(options, context_in(dir / "run"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  for (int step = 1; step <= 1000; ++step) logger.log_scalar("train/loss", 1.0 / step, step);
  const auto finishing = std::chrono::steady_clock::now();
  logger.finish(report::RunStatus::killed);
  CHECK(std::chrono::steady_clock::now() - finishing < std::chrono::seconds(7));
  CHECK(logger.run_id().empty());  // it never reached a server

  std::size_t metrics = 0, params = 0, killed = 0;
  for (const auto& line : lines(dir / "run" / "mlflow" / "pending.jsonl")) {
    const auto op = nlohmann::json::parse(line);
    metrics += op.value("op", "") == "metric";
    params += op.value("op", "") == "param";
    killed += op.value("op", "") == "status" && op.value("key", "") == "KILLED";
  }
  CHECK(metrics == 1000);
  CHECK(params == 5);  // max_epochs, criterion/name, criterion/args/m, metric_args/cmc_top_k, dir
  CHECK(killed == 1);
}

TEST_CASE(
    "A resumed mlflow logger sends what the killed process left, without its steps after the checkpoint",
    "[report][mlflow]") {
  TempDir dir;
  auto context = context_in(dir / "run");
  {
    report::MlflowOptions away;
    away.tracking_uri = "http://127.0.0.1:" + std::to_string(unused_port());
    report::MlflowLogger logger(away, context);
    for (int step = 1; step <= 6; ++step) logger.log_scalar("train/loss", step, step);
    // Killed: no finish; everything waits in pending.jsonl.
  }
  context.resumed_at_step = 4;  // the checkpoint's step
  report::MlflowOptions options;
  options.tracking_uri = "file:store";
  {
    report::MlflowLogger logger(options, context);
    for (int step = 5; step <= 7; ++step) logger.log_scalar("train/loss", 10 * step, step);
    logger.finish(report::RunStatus::finished);
  }
  const fs::path run = only_run(dir / "run" / "store");
  std::vector<std::string> values;
  for (const auto& line : lines(run / "metrics" / "train" / "loss")) values.push_back(line.substr(14));
  CHECK(values == std::vector<std::string>{"1.0 1", "2.0 2", "3.0 3", "4.0 4", "50.0 5", "60.0 6", "70.0 7"});
  CHECK(read_file(run / "tags" / "oml.resumed_at_step") == "4");
  CHECK(read_file(run / "params" / "max_epochs") == "2");  // a new MLflow run: this process's config
}

}  // namespace mlflow_logger_tests
