#include "oml/report/run_logger.h"

#include "oml/registry/registries.h"
#include "oml/report/tensorboard_writer.h"

namespace oml::report {

std::shared_ptr<RunLogger> make_run_logger(const std::optional<config::ComponentSpec>& spec,
                                           const LoggerContext& context, bool writer) {
  if (!writer || !spec) return std::make_shared<NullLogger>();
  return registries().loggers.create(*spec, context);
}

void register_builtin_loggers(Registries& registries) {
  auto& registry = registries.loggers;
  registry.add(
      "tensorboard",
      [](const config::Node& args, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        TensorBoardOptions options;
        config::MapReader reader(args, "logger 'tensorboard' args");
        reader.optional("subdir", options.subdir);
        reader.finish();
        return std::make_shared<TensorBoardWriter>(
            options.subdir.empty() ? context.run_dir : context.run_dir / options.subdir,
            context.resumed_at_step);
      },
      "subdir = tensorboard: TensorBoard event files (scalars, retrieval grids) under the run directory");
  registry.add(
      "none",
      [](const config::Node& args, const LoggerContext&) -> std::shared_ptr<RunLogger> {
        config::MapReader(args, "logger 'none' args").finish();
        return std::make_shared<NullLogger>();
      },
      "records nothing besides train.jsonl and metrics.jsonl (same as logger: null)");
}

}  // namespace oml::report
