#pragma once
// Where a run's numbers and pictures go besides train.jsonl / metrics.jsonl: the `logger:`
// component of the config (docs/reports.md). Built-in: `tensorboard` (the default) writes TensorBoard
// event files into the run directory; `none` (or `logger: null`) records nothing.
//
//   auto logger = report::make_run_logger(cfg.logger, {run_dir, ctx.is_main()});
//   logger->log_scalar("train/loss", 0.42, step);
//
// Contract for a logger (built-in or from a plugin, registered in registries().loggers):
//   - log_scalar / log_image may be called many times per step, from one thread;
//   - whatever was logged before a crash must survive it (flush as you go);
//   - errors are oml::RuntimeError naming the file that could not be written.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "oml/config/reader.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::report {

/// An encoded PNG and its size (TensorBoard wants both).
struct EncodedImage {
  std::string png;
  int height = 0;
  int width = 0;
  int channels = 3;  ///< 3 RGB, 4 RGBA, 1 grey
};

class RunLogger {
 public:
  virtual ~RunLogger() = default;
  /// One value of the series `tag` ("train/loss", "OVERALL/cmc/1") at `step`.
  virtual void log_scalar(const std::string& tag, double value, int64_t step) = 0;
  /// One picture of the series `tag` at `step`.
  virtual void log_image(const std::string& tag, const EncodedImage& image, int64_t step) = 0;
};

/// What a logger's build gets besides its args.
struct LoggerContext {
  std::filesystem::path run_dir;  ///< the run directory (created already)
  /// Set when a run is resumed from its checkpoint at this step: anything the logger finds in
  /// run_dir logged after it came from the killed process and is logged again now, so the
  /// logger drops or hides it (the tensorboard logger does both).
  std::optional<int64_t> resumed_at_step;
};

/// Logs nothing: `logger: null`, `logger: {name: none}` and ranks other than 0.
class NullLogger final : public RunLogger {
 public:
  void log_scalar(const std::string&, double, int64_t) override {}
  void log_image(const std::string&, const EncodedImage&, int64_t) override {}
};

/// The config's logger for this process: the registered component named by `spec`, or a
/// NullLogger when `spec` is empty or this process is not the one that writes (`writer` false:
/// only rank 0 writes, so that N ranks do not produce N event files).
std::shared_ptr<RunLogger> make_run_logger(const std::optional<config::ComponentSpec>& spec,
                                           const LoggerContext& context, bool writer = true);

/// Checks that the logger `spec` names is registered (Registry::require). OML's loggers that need a
/// network service — wandb, neptune, clearml, mlflow — get a ConfigError saying that they are not
/// available offline and what is, instead of "unknown logger" (unless a plugin registered one).
void require_logger(const config::ComponentSpec& spec);

/// Registers `tensorboard` and `none`.
void register_builtin_loggers(Registries& registries);

}  // namespace oml::report
