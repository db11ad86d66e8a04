#pragma once
// What the tests of the offline tracker loggers (wandb, neptune, clearml) share: a training run
// with a logger section, a run interrupted by a signal once it has a checkpoint, and the values a
// run logged (train.jsonl and metrics.jsonl) that each tracker must hold.

#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "oml/report/run_logger.h"
#include "pipeline_fixtures.h"

namespace oml::test {

/// oml-train on the small Fashion-MNIST config with `logger_yaml` (a `logger:` line) and `extra`
/// config lines, and `args` on the command line.
inline CommandResult train_with_logger(const TempDir& dir, const std::string& logger_yaml,
                                       const std::string& extra, const std::string& args = "") {
  write_file(dir / "train.yaml", train_config(dir / "logs", logger_yaml + extra));
  return run_oml("oml-train",
                 "--config " + quote((dir / "train.yaml").string()) + " --progress quiet " + args);
}

/// oml-train with `logger_yaml` for (nearly) ever, sent SIG`signal` ("INT", "TERM") once its first
/// checkpoint is written; the output ends with "status=<the exit code>".
inline CommandResult interrupt_training(const TempDir& dir, const std::string& logger_yaml,
                                        const std::string& signal) {
  write_file(dir / "train.yaml", train_config(dir / "logs", logger_yaml));
  const std::filesystem::path last = dir / "logs" / "run" / "checkpoints" / "last.ckpt";
  const std::string script =
      "set -m; " + quote(command_path("oml-train")) + " --config " + quote((dir / "train.yaml").string()) +
      " --set max_epochs=1000 --progress quiet & pid=$!; for i in $(seq 4800); do if [ -f " +
      quote(last.string()) + " ]; then break; fi; sleep 0.05; done; kill -" + signal +
      " $pid; wait $pid; echo status=$?";
  // Generous bounds: beside a parallel test that trains a ViT, the first epoch and its
  // validation took over a minute (the signal lands after last.ckpt, whenever that is).
  return run("bash -c " + quote(script), 420);
}

/// What a process that resumed `run` from its checkpoint at step 3 (continuing the tracker run
/// `id`) leaves when it is killed after logging steps 4 and 5: a `Logger` that logged them and
/// was flushed but never finished. A run resumed from the same checkpoint must drop them.
template <class Logger>
void log_as_killed_process(const std::filesystem::path& run, const std::string& id) {
  report::LoggerContext context;
  context.run_dir = run;
  context.run_name = run.filename().string();
  context.resumed_run_id = id;
  context.resumed_at_step = 3;
  Logger killed({}, context, nlohmann::json::object());
  killed.log_scalar("train/loss", 99.0, 4);
  killed.log_scalar("train/loss", 99.0, 5);
  killed.flush();
}

/// Every value the run logged, by (key, step): each number of train.jsonl but epoch and step as
/// "train/<key>", each metric of metrics.jsonl as it is named there ("OVERALL/cmc/1").
inline std::map<std::pair<std::string, int64_t>, double> logged_values(const std::filesystem::path& run) {
  std::map<std::pair<std::string, int64_t>, double> out;
  for (const auto& record : read_jsonl(run / "train.jsonl"))
    for (const auto& item : record.items())
      if (item.key() != "epoch" && item.key() != "step" && item.value().is_number())
        out[{"train/" + item.key(), record.at("step").get<int64_t>()}] = item.value().get<double>();
  for (const auto& record : read_jsonl(run / "metrics.jsonl"))
    for (const auto& item : record.at("metrics").items())
      out[{item.key(), record.at("step").get<int64_t>()}] = item.value().get<double>();
  return out;
}

/// The worst-query grid file of the run's `validation`-th validation (1-based, one a epoch).
inline std::filesystem::path grid_file(const std::filesystem::path& run, std::size_t validation,
                                       const std::string& name = "worst_cmc_1") {
  char epoch[32];
  std::snprintf(epoch, sizeof(epoch), "epoch_%03zu", validation);
  return run / "images" / epoch / (name + ".png");
}

}  // namespace oml::test
