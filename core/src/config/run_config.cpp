#include "oml/config/run_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>

#include "oml/common/strings.h"
#include "oml/config/error_list.h"

namespace oml::config {

namespace {

std::optional<ComponentSpec> component(MapReader& reader, const std::string& key) {
  Node node = reader.take(key);
  if (node.is_null()) return std::nullopt;
  return parse_component(node, key);
}

// An enumeration's value from its spelling (`names` in enum order); `aliases` map other spellings
// to one of `names`. ConfigError at the node otherwise, with the spellings and the closest one.
template <class Enum>
Enum parse_enum(const Node& node, const std::vector<std::string>& names,
                const std::vector<std::pair<std::string, std::string>>& aliases = {}) {
  std::string value = node.as<std::string>();
  for (const auto& [alias, canonical] : aliases) {
    if (value == alias) value = canonical;
  }
  if (const std::optional<Enum> found = from_name<Enum>(value, names)) return *found;
  std::vector<std::string> allowed = names;
  for (const auto& alias : aliases) allowed.push_back(alias.first);
  node.fail("expected one of " + join(allowed) + ", got '" + value + "'" + did_you_mean(value, allowed));
}

// Reads `key` of `reader` into an enumeration when present and not null.
template <class Enum>
void optional_enum(MapReader& reader, const std::string& key, Enum& field,
                   const std::vector<std::string>& names,
                   const std::vector<std::pair<std::string, std::string>>& aliases = {}) {
  const Node node = reader.take(key);
  if (!node.is_null()) field = parse_enum<Enum>(node, names, aliases);
}

// `retrieval_backend:` is a component with two keys of its own next to name and args.
std::optional<ComponentSpec> parse_retrieval_backend(const Node& node, int64_t& report_recall,
                                                     DistanceKind& distance) {
  if (node.is_null()) return std::nullopt;
  if (!node.is_map()) {
    node.fail("expected {name: ..., args: {...}, distance: ..., report_recall: N} for retrieval_backend");
  }
  MapReader reader(node, "retrieval_backend");
  ComponentSpec spec;
  reader.required("name", spec.name);
  spec.args = reader.take("args");
  if (spec.args.defined() && !spec.args.is_null() && !spec.args.is_map()) {
    spec.args.fail("expected a mapping of arguments for retrieval backend '" + spec.name + "'");
  }
  reader.optional("report_recall", report_recall);
  reader.custom([&] {
    const Node given = reader.take("distance");
    if (!given.defined() || given.is_null()) return;
    const std::string name = given.as<std::string>();
    const std::optional<DistanceKind> kind = parse_distance_kind(name);
    if (!kind) given.fail("expected " + distance_kind_names() + ", got '" + name + "'");
    distance = *kind;
  });
  spec.node = node;
  reader.finish();
  if (report_recall < 0) {
    node["report_recall"].fail(
        "expected 0 (off) or a number of queries whose exact top-k measure the recall, got " +
        std::to_string(report_recall));
  }
  return spec;
}

DdpOptions parse_ddp(const Node& node) {
  DdpOptions ddp;
  MapReader r(node, "ddp");
  r.optional("shuffle_between_ranks", ddp.shuffle_between_ranks)
      .optional("pad_to_world_size", ddp.pad_to_world_size)
      .optional("bucket_mb", ddp.bucket_mb)
      .optional("timeout_s", ddp.timeout_s)
      .optional("check_params_every", ddp.check_params_every)
      .optional("gather_embeddings_for_loss", ddp.gather_embeddings_for_loss);
  optional_enum(r, "gradient_compression", ddp.gradient_compression, gradient_compression_names());
  r.finish();
  // Negated so that NaN fails too; the upper bounds keep the byte and millisecond counts in range.
  if (!(ddp.bucket_mb > 0 && ddp.bucket_mb <= 1e6)) {
    node["bucket_mb"].fail("expected a positive size in MB, at most 1000000");
  }
  if (!(ddp.timeout_s > 0 && ddp.timeout_s <= 1e7)) {
    node["timeout_s"].fail("expected a positive number of seconds, at most 10000000");
  }
  if (ddp.check_params_every < 0)
    node["check_params_every"].fail("expected 0 (off) or a positive step count");
  return ddp;
}

AudioOptions parse_audio(const Node& node) {
  AudioOptions audio;
  MapReader r(node, "audio");
  r.optional("sample_rate", audio.sample_rate)
      .optional("max_num_seconds", audio.max_num_seconds)
      .optional("convert_to_mono", audio.convert_to_mono);
  r.finish();
  if (audio.sample_rate <= 0) node["sample_rate"].fail("expected a positive rate in Hz");
  if (!std::isfinite(audio.max_num_seconds) || audio.max_num_seconds < 0)
    node["max_num_seconds"].fail("expected a positive duration in seconds, or 0 for whole files");
  if (audio.max_num_seconds > 0 && audio.max_num_seconds * static_cast<double>(audio.sample_rate) < 1.0) {
    node["max_num_seconds"].fail("expected at least one sample's duration (1 / sample_rate seconds), got " +
                                 std::to_string(audio.max_num_seconds));
  }
  return audio;
}

SchedulingOptions parse_scheduling(const Node& node) {
  SchedulingOptions s;
  MapReader r(node, "scheduling");
  s.scheduler = component(r, "scheduler");
  optional_enum(r, "scheduler_interval", s.scheduler_interval, scheduler_interval_names());
  r.optional("scheduler_frequency", s.scheduler_frequency).optional("monitor_metric", s.monitor_metric);
  r.finish();
  if (s.scheduler_frequency < 1) node["scheduler_frequency"].fail("expected a positive integer");
  return s;
}

// OML's configs carry a `hydra:` block for Hydra's launcher. Its run directory (`run.dir`) means
// the same here; the rest has no counterpart and is named in a notice, not silently dropped.
std::string read_hydra_block(const Node& hydra, std::vector<std::string>& notices) {
  if (hydra.is_null()) return "";
  if (!hydra.is_map()) hydra.fail("expected Hydra's settings mapping (run: {dir: ...}, job: ..., ...)");
  std::string run_dir;
  std::vector<std::string> ignored;
  for (const std::string& key : hydra.keys()) {
    if (key == "searchpath") {
      // `file://` folders and OML's `pkg://oml.configs` (the shipped groups) are where
      // `defaults:` looks (config/composition.h); other Python packages have no counterpart.
      for (const std::string& entry : hydra["searchpath"].as<std::vector<std::string>>()) {
        if (!starts_with(entry, "file://") && entry != "pkg://oml.configs") {
          ignored.push_back("hydra.searchpath entry " + entry);
        }
      }
      continue;
    }
    if (key != "run") {
      ignored.push_back("hydra." + key);
      continue;
    }
    MapReader run(hydra["run"], "hydra.run");
    run.optional("dir", run_dir);
    for (const std::string& other : hydra["run"].keys()) {
      if (other != "dir") ignored.push_back("hydra.run." + other);
    }
  }
  if (hydra["job"]["chdir"].defined() && hydra["job"]["chdir"].as<bool>()) {
    notices.push_back(
        "hydra.job.chdir: oml-cpp does not change the working directory; relative paths in the "
        "config are relative to where the command runs, and outputs go to the run directory");
  }
  if (!ignored.empty()) {
    notices.push_back("ignored Hydra settings without a counterpart in oml-cpp: " + join(ignored) +
                      " (--set overrides, ${...} interpolates, defaults: composes config groups)");
  }
  return run_dir;
}

// Lightning's spellings of the three modes oml-cpp has. Its other values (64, "bf16-true",
// "16-true", "transformer-engine") keep weights in the low precision or need hardware this
// build has no kernels for: they are errors listing what is accepted.
const std::vector<std::pair<std::string, Precision>>& precision_spellings() {
  static const std::vector<std::pair<std::string, Precision>> spellings{
      {"32", Precision::fp32},         {"32-true", Precision::fp32}, {"bf16", Precision::bf16},
      {"bf16-mixed", Precision::bf16}, {"16", Precision::fp16},      {"16-mixed", Precision::fp16}};
  return spellings;
}

// `profile:` as a YAML value: a scalar read by parse_step_range.
StepRange parse_step_range_node(const Node& node) {
  StepRange range;
  std::string problem = "expected \"FROM:TO\" (e.g. \"10:12\") or one step number";
  if (node.is_scalar()) problem = parse_step_range(node.as<std::string>(), range);
  if (!problem.empty()) node.fail(problem);
  return range;
}

}  // namespace

Precision parse_precision(const Node& node) {
  if (!node.is_scalar())
    node.fail("expected a precision (32, bf16 or 16, or Lightning's 32-true, bf16-mixed, 16-mixed)");
  const std::string value = node.as<std::string>();
  std::vector<std::string> names;
  for (const auto& [name, precision] : precision_spellings()) {
    if (name == value) return precision;
    names.push_back(name);
  }
  std::string hint;
  if (value == "bf16-true" || value == "16-true" || value == "64" || value == "64-true") {
    hint = " (oml-cpp keeps master weights in float32: mixed precision only)";
  }
  node.fail("expected one of " + join(names) + ", got '" + value + "'" + hint + did_you_mean(value, names));
}

RunConfig parse_run_config(const Node& root, ErrorList& errors) {
  // Each check below is independent: its problem is collected and the next one still runs, so
  // that a config's mistakes are reported together.
  const auto check = [&](const std::function<void()>& one) { errors.check(one); };
  RunConfig c;
  std::string logs_folder, hydra_dir, hydra_run_dir;
  MapReader r(root, "the config", &errors);
  const Node devices = r.take("devices");
  const Node precision = r.take("precision");
  const Node profile = r.take("profile");
  check([&] { optional_enum(r, "pipeline", c.pipeline, pipeline_names()); });
  check([&] { optional_enum(r, "accelerator", c.accelerator, accelerator_names(), {{"gpu", "cuda"}}); });
  check([&] { optional_enum(r, "memory_format", c.memory_format, memory_format_names()); });
  check([&] {
    optional_enum(r, "float32_matmul_precision", c.float32_matmul_precision,
                  float32_matmul_precision_names());
  });
  check(
      [&] { optional_enum(r, "mode_for_checkpointing", c.mode_for_checkpointing, checkpoint_mode_names()); });
  r.optional("seed", c.seed)
      .optional("find_unused_parameters", c.find_unused_parameters)
      .optional("tags", c.tags)
      .optional("num_threads", c.num_threads)
      .optional("dataset_root", c.dataset_root)
      .optional("dataframe_name", c.dataframe_name)
      .optional("logs_root", c.logs_root)
      .optional("run_name", c.run_name)
      .optional("logs_folder", logs_folder)
      .optional("hydra_dir", hydra_dir)
      .optional("postfix", c.postfix)
      .optional("plugins", c.plugins)
      .optional("num_workers", c.num_workers)
      .optional("cache_size", c.cache_size)
      .optional("max_image_pixels", c.max_image_pixels)
      .optional("bs_train", c.bs_train)
      .optional("bs_val", c.bs_val)
      .optional("freeze_n_epochs", c.freeze_n_epochs)
      .optional("max_epochs", c.max_epochs)
      .optional("max_steps", c.max_steps)
      .optional("cuda_graphs", c.cuda_graphs)
      .optional("valid_period", "check_val_every_n_epoch", c.valid_period)
      .optional("metric_for_checkpointing", c.metric_for_checkpointing)
      .optional("log_images", c.log_images)
      .optional("hard_pairs_mining", c.hard_pairs_mining)
      .optional("embeddings_cache_dir", c.embeddings_cache_dir)
      .optional("batch_size_inference", "bs", c.batch_size_inference)
      .optional("embeddings", c.embeddings)
      .optional("data_dir", c.data_dir)
      .optional("save_dir", c.save_dir)
      .optional("weights", c.weights)
      .optional("extractor_weights", c.extractor_weights)
      .optional("postprocessor_weights", c.postprocessor_weights)
      .optional("show_dataset_warnings", c.show_dataset_warnings)
      .optional("weights_dir", c.weights_dir);
  const std::vector<std::pair<const char*, std::optional<ComponentSpec>*>> components{
      {"transforms_train", &c.transforms_train},
      {"transforms_val", &c.transforms_val},
      {"transforms_extraction", &c.transforms_extraction},
      {"transforms_predict", &c.transforms_predict},
      {"sampler", &c.sampler},
      {"extractor", &c.extractor},
      {"criterion", &c.criterion},
      {"optimizer", &c.optimizer},
      {"postprocessor", &c.postprocessor},
      {"pairwise_model", &c.pairwise_model}};
  for (const auto& [key, slot] : components)
    check([&, key = key, slot = slot] { *slot = component(r, key); });
  // TensorBoard logging is on unless the config says otherwise (`logger: null` or
  // `logger: {name: none}`): an absent key means the default logger, not none.
  if (r.has("logger")) {
    check([&] { c.logger = component(r, "logger"); });
  } else {
    c.logger = ComponentSpec{"tensorboard", Node(), Node()};
  }
  // OML's pairwise validation config names the re-ranker's model only inside the postprocessor
  // (postprocessor.args.pairwise_model): it is the pipeline's pairwise model then.
  if (!c.pairwise_model && c.postprocessor && c.postprocessor->name == "pairwise_reranker" &&
      c.postprocessor->args.is_map() && !c.postprocessor->args["pairwise_model"].is_null()) {
    check([&] {
      c.pairwise_model =
          parse_component(c.postprocessor->args["pairwise_model"], "postprocessor.args.pairwise_model");
    });
  }
  // OML picks the pipeline by the script a config is run with (train.py, train_postprocessor.py);
  // here a config without `pipeline:` that trains or validates a pairwise model and no loss is
  // the pairwise pipeline.
  if (!r.has("pipeline") && c.pairwise_model && !c.criterion) c.pipeline = Pipeline::pairwise;
  check([&] {
    c.retrieval_backend =
        parse_retrieval_backend(r.take("retrieval_backend"), c.report_recall, c.retrieval_distance);
  });
  check([&] { c.scheduling = parse_scheduling(r.take("scheduling")); });
  c.metric_args = r.take("metric_args");
  check([&] { c.ddp = parse_ddp(r.take("ddp")); });
  check([&] { c.audio = parse_audio(r.take("audio")); });
  if (c.pipeline == Pipeline::pairwise && c.ddp.gather_embeddings_for_loss) {
    check([&] {
      root["ddp"]["gather_embeddings_for_loss"].fail(
          "only pipeline: extractor gathers the ranks' embeddings for its loss; the pairwise pipeline "
          "mines its pairs within each rank's batch (set it to false or remove it)");
    });
  }
  check([&] { hydra_run_dir = read_hydra_block(r.take("hydra"), c.notices); });
  c.controls = parse_training_controls(r, c.valid_period, errors);
  r.finish();

  if (!precision.is_null()) {
    check([&] {
      c.precision = parse_precision(precision);
      // `auto` on a machine without a GPU is caught once the device is known (start_run).
      if (c.precision == Precision::fp16 && c.accelerator == Accelerator::cpu) {
        precision.fail(
            "precision 16 is float16 autocast with a gradient scaler, which needs accelerator: cuda; "
            "on the CPU use precision: bf16 (bfloat16 autocast, same float32 master weights)");
      }
    });
  }
  check([&] {
    if (devices.is_sequence()) {  // Lightning's list of GPU ids
      c.device_ids = devices.as<std::vector<int64_t>>();
      if (c.device_ids.empty()) devices.fail("expected a positive integer or a non-empty list of GPU ids");
      for (std::size_t i = 0; i < c.device_ids.size(); ++i) {
        if (c.device_ids[i] < 0) devices[i].fail("expected a GPU id >= 0");
        for (std::size_t j = 0; j < i; ++j) {
          if (c.device_ids[j] == c.device_ids[i]) devices[i].fail("GPU id appears twice in the list");
        }
      }
      c.devices = static_cast<int64_t>(c.device_ids.size());
    } else if (!devices.is_null()) {
      c.devices = devices.as<int64_t>();
      if (c.devices < 1 || c.devices > kMaxRanksPerNode) {
        devices.fail("expected 1 to " + std::to_string(kMaxRanksPerNode) + " ranks per machine, got " +
                     std::to_string(c.devices));
      }
    }
  });
  // The run directory, as OML names it: hydra.run.dir (usually ${hydra_dir} = ${logs_root}/${logs_folder}),
  // else logs_root/logs_folder; an explicit run_name wins.
  if (c.run_name.empty() && !hydra_run_dir.empty()) {
    std::string dir = hydra_run_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::filesystem::path path(dir);
    c.logs_root = path.has_parent_path() ? path.parent_path().string() : ".";
    c.run_name = path.filename().string();
  } else if (c.run_name.empty()) {
    c.run_name = logs_folder;
  }
  const auto require = [&](bool ok, const char* key, const std::string& expected) {
    if (!ok) check([&] { root[key].fail(expected); });
  };
  const auto positive = [&](const char* key, int64_t value) {
    require(value >= 1, key, "expected a positive integer, got " + std::to_string(value));
  };
  // The run directory is logs_root/<name>: one folder's name, which cannot leave logs_root.
  // Without either, a default name ends with the postfix.
  const char* name_key = !root["run_name"].is_null()      ? "run_name"
                         : !root["logs_folder"].is_null() ? "logs_folder"
                         : !c.postfix.empty()             ? "postfix"
                                                          : nullptr;
  if (name_key) {
    const std::string& name = std::string(name_key) == "postfix" ? c.postfix : c.run_name;
    const bool one_name = !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
                          std::none_of(name.begin(), name.end(), [](char ch) {
                            return ch == '/' || static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
                          });
    require(one_name, name_key,
            "expected one folder's name for the run directory (at most 255 bytes, no '/', no control "
            "characters, not '.' or '..'), got '" +
                name.substr(0, 80) + (name.size() > 80 ? "...'" : "'") + "; put parent folders in logs_root");
  }
  positive("bs_train", c.bs_train);
  positive("bs_val", c.bs_val);
  positive("max_epochs", c.max_epochs);
  positive(root["valid_period"].is_null() ? "check_val_every_n_epoch" : "valid_period", c.valid_period);
  positive(root["bs"].is_null() ? "batch_size_inference" : "bs", c.batch_size_inference);
  require(!c.max_steps || *c.max_steps >= 1, "max_steps", "expected a positive integer or null");
  if (!profile.is_null()) check([&] { c.profile = parse_step_range_node(profile); });
  require(c.num_threads >= 0, "num_threads", "expected 0 (automatic) or a positive integer");
  require(c.num_workers >= 0 && c.num_workers <= kMaxLoaderWorkers, "num_workers",
          "expected 0 to " + std::to_string(kMaxLoaderWorkers) + " loader threads, got " +
              std::to_string(c.num_workers));
  require(c.cache_size >= 0, "cache_size", "expected 0 (off) or a positive number of images");
  require(c.max_image_pixels >= 0, "max_image_pixels",
          "expected 0 (no limit) or a positive number of pixels");
  require(c.freeze_n_epochs >= 0, "freeze_n_epochs", "expected 0 or a positive integer");
  c.source = root;
  return c;
}

std::string parse_step_range(const std::string& text, StepRange& range) {
  const std::string expected =
      "expected \"FROM:TO\", the optimizer steps to profile numbered from 1 as train.jsonl's `step` "
      "(e.g. \"10:12\"), or one step number, got '" +
      text + "'";
  const auto number = [](const std::string& part, int64_t& value) {
    const std::string digits = trim(part);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return !digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && value >= 1;
  };
  const auto colon = text.find(':');
  StepRange parsed;
  if (!number(text.substr(0, colon), parsed.from)) return expected;
  parsed.to = parsed.from;
  if (colon != std::string::npos && !number(text.substr(colon + 1), parsed.to)) return expected;
  if (parsed.to < parsed.from) return "the range ends before it starts: '" + text + "'";
  range = parsed;
  return "";
}

RunConfig parse_run_config(const Node& root) {
  ErrorList errors;
  RunConfig c = parse_run_config(root, errors);
  errors.throw_if_any();
  return c;
}

namespace {
// The deepest node along `parts` that the config spells. By recursion, not by assigning Nodes:
// assigning a YAML::Node writes through it into the tree.
Node deepest_spelled(const Node& node, const std::vector<std::string>& parts, std::size_t i) {
  if (i == parts.size() || !node.is_map()) return node;
  const Node child = node[parts[i]];
  if (!child.defined()) return node;
  return deepest_spelled(child, parts, i + 1);
}
}  // namespace

ConfigError place_setting_error(const Node& root, const SettingError& error) {
  const Node node = deepest_spelled(root, split(error.key(), '.'), 0);
  const std::string where = node.defined() && node.path() == error.key() ? node.describe()
                            : node.defined()                             ? node.where() + ": " + error.key()
                                                                         : error.key();
  ConfigError placed(where + ": " + error.message());
  for (const std::string& line : error.context()) placed.add_context(line);
  return placed;
}

}  // namespace oml::config
