#include "oml/report/run_logger.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <string_view>

#include "oml/common/logging.h"
#include "oml/common/paths.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"
#include "oml/registry/registries.h"
#include "oml/report/clearml_task.h"
#include "oml/report/mlflow_logger.h"
#include "oml/report/neptune_run.h"
#include "oml/report/tensorboard_writer.h"
#include "oml/report/wandb_run.h"

namespace oml::report {

namespace {

// YAML 1.2 core schema, as PyYAML/OmegaConf users expect to see their values again.
nlohmann::json scalar_as_json(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: a string whatever it looks like
  static const std::regex null_re("~|null|Null|NULL|");
  static const std::regex true_re("true|True|TRUE");
  static const std::regex false_re("false|False|FALSE");
  static const std::regex int_re("[-+]?[0-9]+");
  static const std::regex float_re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(text, null_re)) return nullptr;
  if (std::regex_match(text, true_re)) return true;
  if (std::regex_match(text, false_re)) return false;
  try {
    if (std::regex_match(text, int_re)) return std::stoll(text);
    if (std::regex_match(text, float_re)) return std::stod(text);
  } catch (const std::out_of_range&) {
    return text;  // beyond int64/double: kept as written
  }
  return text;
}

nlohmann::json yaml_as_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = yaml_as_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(yaml_as_json(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalar_as_json(node);
    default:
      return nullptr;
  }
}

void flatten_into(const nlohmann::json& value, const std::string& path, const std::string& separator,
                  std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& item : value.items())
      flatten_into(item.value(), path.empty() ? item.key() : path + separator + item.key(), separator, out);
    return;
  }
  out.emplace_back(path, value.is_string() ? value.get<std::string>() : value.dump());
}

void flatten_values_into(const nlohmann::json& value, const std::string& path, const std::string& separator,
                         std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (!value.is_object()) {
    out.emplace_back(path, value);
    return;
  }
  for (const auto& item : value.items())
    flatten_values_into(item.value(), path.empty() ? item.key() : path + separator + item.key(), separator,
                        out);
}

// `tags` as the trackers' clients take them: a list, or one tag as a string.
std::vector<std::string> read_tags(const config::Node& node) {
  if (node.is_null()) return {};
  if (node.is_scalar()) return {node.as<std::string>()};
  return node.as<std::vector<std::string>>();
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// A logger's folder option (tensorboard's subdir, wandb's save_dir) is a folder inside the run
// directory: the run owns what is there (a resume cuts its event files back to the checkpoint),
// so a path leaving it would have another run's files cut (absolute, or with a ".." part).
void check_inside_run_dir(const std::string& component, const std::string& key, const std::string& value) {
  config::check_argument(stays_inside_folder(value), component, key,
                         "must be a folder inside the run directory (a relative path ",
                         "without '..'), got '", value, "'");
}

}  // namespace

std::string run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::finished:
      return "FINISHED";
    case RunStatus::failed:
      return "FAILED";
    case RunStatus::killed:
      return "KILLED";
  }
  return "FAILED";
}

nlohmann::json config_as_json(const std::string& yaml) { return yaml_as_json(YAML::Load(yaml)); }

std::vector<std::pair<std::string, std::string>> flatten_config(const nlohmann::json& config,
                                                                const std::string& separator) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(config, "", separator, out);
  return out;
}

std::vector<std::pair<std::string, nlohmann::json>> flatten_config_values(const nlohmann::json& config,
                                                                          const std::string& separator) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  flatten_values_into(config, "", separator, out);
  return out;
}

std::shared_ptr<RunLogger> make_run_logger(const std::optional<config::ComponentSpec>& spec,
                                           const LoggerContext& context, bool writer) {
  if (!writer || !spec) return std::make_shared<NullLogger>();
  return registries().loggers.create(*spec, context);
}

std::shared_ptr<RunLogger> make_run_logger(
    const std::optional<ParsedComponent<std::shared_ptr<RunLogger>>>& parsed, const LoggerContext& context,
    bool writer) {
  if (!writer || !parsed) return std::make_shared<NullLogger>();
  return registries().loggers.build(*parsed, context);
}

void require_logger(const config::ComponentSpec& spec) { registries().loggers.require(spec); }

void register_builtin_loggers(Registries& registries) {
  auto& registry = registries.loggers;
  registry.add(
      "tensorboard",
      [](config::ArgsReader& reader) {
        TensorBoardOptions options;
        // Lightning's TensorBoardLogger calls the folder save_dir (OML's test configs: save_dir: ".").
        reader.optional("subdir", "save_dir", options.subdir);
        reader.check([&] {
          const std::string key = reader.node()["save_dir"].is_null() ? "subdir" : "save_dir";
          check_inside_run_dir("logger 'tensorboard'", key, options.subdir);
        });
        return options;
      },
      [](const TensorBoardOptions& options, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        return std::make_shared<TensorBoardWriter>(
            options.subdir.empty() ? context.run_dir : context.run_dir / options.subdir,
            context.resumed_at_step);
      },
      "subdir (or Lightning's save_dir) = tensorboard: TensorBoard event files (scalars, retrieval grids) "
      "under "
      "the run directory");
  registry.add(
      "wandb",
      [](config::ArgsReader& reader) {
        WandbOptions options;
        std::string mode = "offline";
        bool offline = true;
        reader.optional("project", options.project)
            .optional("entity", options.entity)
            .optional("name", options.name)
            .optional("id", "version", options.id)
            .optional("tags", options.tags)
            .optional("notes", options.notes)
            .optional("group", options.group)
            .optional("job_type", options.job_type)
            .optional("prefix", options.prefix)
            .optional("save_dir", "dir", options.save_dir)
            .optional("offline", offline)
            .optional("mode", mode)
            .custom([&] {
              // Lightning's log_model: true (at the end) or "all" (as written); both upload the
              // checkpoints' last versions here.
              const config::Node node = reader.take("log_model");
              if (node.is_null()) return;
              options.log_model = node.as<std::string>() == "all" || node.as<bool>();
            });
        reader.check([&] {
          config::check_argument(mode == "offline" || mode == "online" || mode == "disabled",
                                 "logger 'wandb'", "mode", "must be offline, online or disabled, got '", mode,
                                 "'");
          check_inside_run_dir("logger 'wandb'", reader.node()["dir"].is_null() ? "save_dir" : "dir",
                               options.save_dir);
          // W&B's own rule for run ids; the offline run's folder and file are named by it.
          const bool id_ok =
              options.id.size() <= 64 && std::none_of(options.id.begin(), options.id.end(), [](char c) {
                return std::string_view("/\\#?%:").find(c) != std::string_view::npos ||
                       static_cast<unsigned char>(c) < 0x20;
              });
          config::check_argument(id_ok, "logger 'wandb'", "id",
                                 "must be at most 64 characters without / \\ # ? % : or control characters "
                                 "(W&B's rule for run ids), got '",
                                 options.id.substr(0, 80), "'");
        });
        options.online_requested = mode == "online" || !offline;
        options.disabled = mode == "disabled";
        return options;
      },
      [](const WandbOptions& options, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        if (options.disabled) return std::make_shared<NullLogger>();
        if (options.online_requested)
          log::info(
              "wandb: oml-cpp writes W&B runs offline (it does not talk to W&B's servers); "
              "`wandb sync` uploads the run");
        return std::make_shared<WandbOfflineRun>(options, context, config_as_json(context.config_yaml));
      },
      "project = uncategorized, entity, name, id, tags, notes, group, job_type, prefix, save_dir, log_model "
      "= "
      "false, mode = offline: a Weights & Biases offline run under <run dir>/wandb/ that `wandb sync` "
      "uploads (docs/reports.md#weights--biases)");
  registry.add(
      "neptune",
      [](config::ArgsReader& reader) {
        NeptuneOptions options;
        std::string mode = "offline";
        // Accepted and unused: `neptune sync` reads $NEPTUNE_API_TOKEN where it uploads.
        std::string api_key;
        reader.optional("project", options.project)
            .optional("name", options.name)
            .optional("description", options.description)
            .optional("prefix", options.prefix)
            .optional("log_model_checkpoints", options.log_model_checkpoints)
            .optional("mode", mode)
            .optional("api_key", "api_token", api_key)
            .custom([&] { options.tags = read_tags(reader.take("tags")); });
        reader.check([&] {
          config::check_argument(mode == "offline" || mode == "async" || mode == "sync" || mode == "debug",
                                 "logger 'neptune'", "mode", "must be offline, async, sync or debug, got '",
                                 mode, "'");
        });
        if (options.project.empty()) options.project = env_or("NEPTUNE_PROJECT", "");
        options.online_requested = mode == "async" || mode == "sync";
        options.disabled = mode == "debug";
        return options;
      },
      [](const NeptuneOptions& options, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        if (options.disabled) return std::make_shared<NullLogger>();
        if (options.online_requested)
          log::info(
              "neptune: oml-cpp writes Neptune runs offline (it does not talk to Neptune's servers); "
              "`neptune sync` uploads the run");
        return std::make_shared<NeptuneOfflineRun>(options, context, config_as_json(context.config_yaml));
      },
      "project = $NEPTUNE_PROJECT, name, description, tags, prefix = training, log_model_checkpoints = true, "
      "mode = offline, api_key (unused): a Neptune offline run under <run dir>/.neptune/ that `neptune sync` "
      "uploads, with OML's keys (docs/reports.md#neptune)");
  registry.add(
      "clearml",
      [](config::ArgsReader& reader) {
        ClearmlOptions options;
        bool offline = true;
        reader.optional("project_name", options.project_name)
            .optional("task_name", options.task_name)
            .optional("task_type", options.task_type)
            .optional("offline_mode", offline)
            .custom([&] { options.tags = read_tags(reader.take("tags")); });
        reader.check([&] {
          const auto& types = clearml_task_types();
          config::check_argument(std::find(types.begin(), types.end(), options.task_type) != types.end(),
                                 "logger 'clearml'", "task_type", "must be one of ", join(types), ", got '",
                                 options.task_type, "'");
          config::check_argument(!options.project_name.empty(), "logger 'clearml'", "project_name",
                                 "must not be empty");
        });
        options.online_requested = !offline;
        return options;
      },
      [](const ClearmlOptions& options, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        if (options.online_requested)
          log::info(
              "clearml: oml-cpp writes ClearML tasks offline (it does not talk to ClearML's servers); "
              "Task.import_offline_session uploads the session");
        return std::make_shared<ClearmlOfflineTask>(options, context, config_as_json(context.config_yaml));
      },
      "project_name = Untitled, task_name = the run directory's name, task_type = training, tags, "
      "offline_mode "
      "= true: a ClearML offline session under <run dir>/clearml/ (a folder and its zip) that "
      "Task.import_offline_session uploads, with OML's keys (docs/reports.md#clearml)");
  registry.add(
      "mlflow", read_mlflow_options,
      [](const MlflowOptions& options, const LoggerContext& context) -> std::shared_ptr<RunLogger> {
        return std::make_shared<MlflowLogger>(options, context);
      },
      "experiment_name = $MLFLOW_EXPERIMENT_NAME or lightning_logs, tracking_uri = $MLFLOW_TRACKING_URI or "
      "file:<save_dir> (http(s)://host:port: a tracking server; file:path or a path: MLflow's file store, "
      "relative "
      "to the run directory), run_name = the run directory's name, tags = {}, save_dir = ./mlruns, log_model "
      "= "
      "false (true: checkpoints at the end; all: each one), prefix = '', artifact_location = '', run_id = "
      "$MLFLOW_RUN_ID or a new run: Lightning's MLFlowLogger (params, tags, metrics, config.yaml, "
      "report.html)");
  registry.add(
      "none", no_args,
      [](NoOptions, const LoggerContext&) -> std::shared_ptr<RunLogger> {
        return std::make_shared<NullLogger>();
      },
      "records nothing besides train.jsonl and metrics.jsonl (same as logger: null)");
}

}  // namespace oml::report
