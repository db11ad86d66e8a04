#include "oml/report/run_logger.h"

#include <map>

#include "oml/registry/registries.h"
#include "oml/report/tensorboard_writer.h"

namespace oml::report {

std::shared_ptr<RunLogger> make_run_logger(const std::optional<config::ComponentSpec>& spec,
                                           const LoggerContext& context, bool writer) {
  if (!writer || !spec) return std::make_shared<NullLogger>();
  return registries().loggers.create(*spec, context);
}

void require_logger(const config::ComponentSpec& spec) {
  const auto& loggers = registries().loggers;
  static const std::map<std::string, std::string> kServices{{"wandb", "Weights & Biases"},
                                                            {"neptune", "Neptune"},
                                                            {"clearml", "ClearML"},
                                                            {"mlflow", "an MLflow tracking server"}};
  const auto service = kServices.find(spec.name);
  if (!loggers.contains(spec.name) && service != kServices.end()) {
    const config::Node name = spec.node.is_map() ? spec.node["name"] : spec.node;
    name.fail("logger '" + spec.name + "' sends the run to " + service->second +
              ", a network service that oml-cpp does not talk to (it runs offline); use the default "
              "logger: {name: tensorboard} (TensorBoard files in the run directory; plus train.jsonl, "
              "metrics.jsonl and report.html), or logger: null");
  }
  loggers.require(spec);
}

void register_builtin_loggers(Registries& registries) {
  auto& registry = registries.loggers;
  registry.add(
      "tensorboard",
      [](config::ArgsReader& reader) {
        TensorBoardOptions options;
        reader.optional("subdir", options.subdir);
        return options;
      },
      [](const TensorBoardOptions& options, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        return std::make_shared<TensorBoardWriter>(
            options.subdir.empty() ? context.run_dir : context.run_dir / options.subdir,
            context.resumed_at_step);
      },
      "subdir = tensorboard: TensorBoard event files (scalars, retrieval grids) under the run directory");
  registry.add(
      "none", no_args,
      [](NoOptions, const LoggerContext&) -> std::shared_ptr<RunLogger> {
        return std::make_shared<NullLogger>();
      },
      "records nothing besides train.jsonl and metrics.jsonl (same as logger: null)");
}

}  // namespace oml::report
