// What a logger costs the training thread per step: the calls the recorder makes for one step of
// the default job (7 scalars of train.jsonl: loss, lr, samples/s and the loss's 4 logs), an
// end-of-epoch flush every 375 steps, timed on the calling thread; the sending of the mlflow
// logger happens on its own thread and is not in the figure (bench/logger_overhead.sh measures the
// whole step). Loggers: tensorboard, wandb (an offline run), mlflow into a file store, mlflow to a server
// that cannot be reached (queue + pending.jsonl only), and mlflow to --server URI when given.
//
//   bench_loggers [steps] [server URI]      (defaults: 10000, none)
//
// Prints the median and the 99th percentile of the per-step time in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "benchmark.h"
#include "oml/report/mlflow_logger.h"
#include "oml/report/tensorboard_writer.h"
#include "oml/report/wandb_run.h"

namespace loggers_benchmark {

namespace fs = std::filesystem;

namespace {

void time_logger(
    const std::string& name, int steps,
    const std::function<std::shared_ptr<oml::report::RunLogger>(const oml::report::LoggerContext&)>& make) {
  const fs::path dir =
      fs::temp_directory_path() / ("bench_loggers_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  oml::report::LoggerContext context;
  context.run_dir = dir;
  context.run_name = name;
  context.config_yaml = "max_epochs: 12\ncriterion: {name: arcface, args: {m: 0.4, s: 64}}\n";
  auto logger = make(context);
  static const char* keys[] = {"train/loss",     "train/lr",       "train/samples_per_s", "train/active_tri",
                               "train/pos_dist", "train/neg_dist", "train/n_triplets"};
  std::vector<double> us;
  us.reserve(steps);
  for (int step = 1; step <= steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    for (const char* key : keys) logger->log_scalar(key, 1.0 / step, step);
    if (step % 375 == 0) logger->flush();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  logger->finish(oml::report::RunStatus::finished);
  logger.reset();
  fs::remove_all(dir);
  std::sort(us.begin(), us.end());
  std::printf("  %-22s median %7.1f us/step   p99 %8.1f us/step\n", name.c_str(), us[us.size() / 2],
              us[us.size() * 99 / 100]);
}

}  // namespace

OML_BENCHMARK(loggers) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10000;
  const std::string server = argc > 2 ? argv[2] : "";
  std::printf("%d steps of 7 scalars (+ a flush every 375), time on the calling thread:\n", steps);
  using Context = oml::report::LoggerContext;
  time_logger("tensorboard", steps, [](const Context& c) {
    return std::make_shared<oml::report::TensorBoardWriter>(c.run_dir / "tensorboard");
  });
  auto mlflow = [](const std::string& uri) {
    return [uri](const Context& c) {
      oml::report::MlflowOptions options;
      options.experiment_name = "bench_loggers";
      options.tracking_uri = uri;
      return std::make_shared<oml::report::MlflowLogger>(options, c);
    };
  };
  time_logger("wandb_offline", steps, [](const Context& c) {
    return std::make_shared<oml::report::WandbOfflineRun>(oml::report::WandbOptions{}, c,
                                                          oml::report::config_as_json(c.config_yaml));
  });
  time_logger("mlflow_file", steps, mlflow("file:./ml-runs"));
  time_logger("mlflow_unreachable", steps, mlflow("http://127.0.0.1:9"));
  if (!server.empty()) time_logger("mlflow_server", steps, mlflow(server));
  return 0;
}

}  // namespace loggers_benchmark
