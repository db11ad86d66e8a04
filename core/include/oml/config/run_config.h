#pragma once
// The top-level config of every command, parsed once into typed structs (docs/configuration.md).
//
// Components stay as ComponentSpec ({name, args}) here; cli::Invocation::load_config has each
// registry parse them once into `components` (oml/registry/parsed_components.h), from which the
// pipelines build them.
// Unknown keys are errors with file:line:column; Hydra-only keys get a hint.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/common/distance_kind.h"
#include "oml/config/document.h"
#include "oml/config/options.h"
#include "oml/config/precision.h"
#include "oml/config/reader.h"
#include "oml/config/training_controls.h"

namespace oml {
struct ParsedComponents;
}  // namespace oml

namespace oml::config {

class ErrorList;

/// `ddp:` — multi-process settings.
struct DdpOptions {
  bool shuffle_between_ranks = false;  ///< permute sampler items across ranks each epoch
  bool pad_to_world_size = true;       ///< repeat items so every rank gets the same count
  double bucket_mb = 25.0;             ///< gradient all-reduce bucket size
  double timeout_s = 300.0;            ///< collective / rendezvous timeout
  int64_t check_params_every = 0;      ///< debug: verify identical parameters every N steps (0: off)
  /// The type gradient buckets are all-reduced in (none: float32; bf16, fp16: half the bytes).
  GradientCompression gradient_compression = GradientCompression::none;
  /// Every rank's loss sees the embeddings and labels of every rank's batch of the step, as
  /// PML's DistributedLossWrapper (oml/losses/gathered_loss.h); extractor pipeline only.
  bool gather_embeddings_for_loss = false;
};

/// `audio:` — how an audio run's files become items (docs/data.md#audio-dataframes). OML's
/// pipelines have no such keys: the defaults are its constants (DEFAULT_SAMPLE_RATE,
/// MAX_AUDIO_LEN, DEFAULT_CONVERT_TO_MONO).
struct AudioOptions {
  int64_t sample_rate = 16000;   ///< Hz every file is resampled to: the extractor's rate
  double max_num_seconds = 3.0;  ///< each item's duration; 0: whole files
  bool convert_to_mono = true;   ///< average the channels into one
};

/// `scheduling:`
struct SchedulingOptions {
  std::optional<ComponentSpec> scheduler;
  SchedulerInterval scheduler_interval = SchedulerInterval::epoch;
  int64_t scheduler_frequency = 1;
  std::string monitor_metric;  ///< for reduce_on_plateau
};

/// `profile: "FROM:TO"` (or `oml-train --profile FROM:TO`): optimizer steps FROM through TO,
/// numbered from 1 as train.jsonl's `step`.
struct StepRange {
  int64_t from = 1;
  int64_t to = 1;
};

struct RunConfig {
  Pipeline pipeline = Pipeline::extractor;
  int64_t seed = 42;
  Accelerator accelerator = Accelerator::cpu;
  int64_t devices = 1;  ///< ranks per machine (`devices: N`, or the length of a list)
  /// `devices: [1, 3]` (OML/Lightning): the GPUs of local ranks 0, 1, ...; empty: rank i uses GPU i.
  std::vector<int64_t> device_ids;
  /// Accepted from OML configs. oml-cpp's gradient sync always handles parameters that got no
  /// gradient in a step (they count as zero), so there is nothing to find.
  bool find_unused_parameters = false;
  std::vector<std::string> tags;  ///< free labels, kept in config.yaml (and so in report.html)
  /// Lines the command prints once (Hydra settings of an OML config that have no effect here).
  std::vector<std::string> notices;
  int64_t num_threads = 0;  ///< intra-op threads per rank; 0 = cores / local ranks
  /// Autocast of the forward and the loss (training, validation, prediction). `16` with
  /// `accelerator: cpu` is a config error (use bf16); with `auto` that resolves to the CPU it is
  /// reported when the device is known (pipelines/runtime/run_context.cpp).
  Precision precision = Precision::fp32;
  std::string dataset_root;
  std::string dataframe_name = "df.csv";
  std::string logs_root = "logs";
  std::string run_name;  ///< default: `logs_folder` (OML's name for it), else timestamp + postfix
  std::string postfix;
  std::vector<std::string> plugins;
  int64_t num_workers = 2;
  int64_t cache_size = 0;
  /// Images of more pixels are refused before they are decoded (PIL's MAX_IMAGE_PIXELS); 0: none.
  int64_t max_image_pixels = 89'478'485;

  std::optional<ComponentSpec> transforms_train;
  std::optional<ComponentSpec> transforms_val;
  std::optional<ComponentSpec> transforms_extraction;
  std::optional<ComponentSpec> transforms_predict;
  std::optional<ComponentSpec> sampler;  ///< null: random with bs_train, drop_last
  int64_t bs_train = 32;
  int64_t bs_val = 128;

  std::optional<ComponentSpec> extractor;
  std::optional<ComponentSpec> criterion;
  std::optional<ComponentSpec> optimizer;
  SchedulingOptions scheduling;
  int64_t freeze_n_epochs = 0;
  int64_t max_epochs = 1;
  std::optional<int64_t> max_steps;
  /// The steps oml-train records into a trace (docs/training.md#profiling-a-run); none: no profile.
  std::optional<StepRange> profile;
  /// Capture the training step into a CUDA graph once and replay it (docs/training.md#cuda-graphs);
  /// where it cannot be (the CPU, DDP, ...), a warning and eager steps.
  bool cuda_graphs = false;
  /// The model's convolution weights in NCHW or channels_last, wherever the model is placed on
  /// its device (training, validation, prediction; docs/training.md#memory-format).
  MemoryFormat memory_format = MemoryFormat::contiguous;
  /// torch.set_float32_matmul_precision in every process of the run
  /// (docs/training.md#float32-matrix-products).
  Float32MatmulPrecision float32_matmul_precision = Float32MatmulPrecision::highest;
  /// Validate after every valid_period-th epoch and after the last one (OML's name; Lightning's
  /// `check_val_every_n_epoch` is read into it).
  int64_t valid_period = 1;
  /// Lightning's accumulate_grad_batches, gradient clipping, limit_*_batches and early stopping.
  TrainingControls controls;
  /// `metric_args:` as written (undefined when absent). Every registered metric, plugins'
  /// included, reads its keys from it: metrics::configure_metrics (oml/metrics/metric_table.h)
  /// checks it once plugins are loaded.
  Node metric_args;
  std::string metric_for_checkpointing = "OVERALL/cmc/1";
  CheckpointMode mode_for_checkpointing = CheckpointMode::max;
  bool log_images = false;
  std::optional<ComponentSpec> logger;
  DdpOptions ddp;
  /// Read whether or not the run reads audio; a run that does not refuses the key
  /// (pipelines::run_inputs), so a stray `audio:` is not silently ignored.
  AudioOptions audio;

  std::optional<ComponentSpec> postprocessor;
  /// `retrieval_backend: {name, args, report_recall}` — who finds the top-k of every retrieval
  /// (oml/retrieval/backend.h); absent or null: `exact`.
  std::optional<ComponentSpec> retrieval_backend;
  /// `retrieval_backend.report_recall`: queries whose exact top-k measure the backend's recall (0: off).
  int64_t report_recall = 0;
  /// `retrieval_backend.distance`: what retrieval, metrics and thresholds measure
  /// (oml/retrieval/distance_space.h); euclidean by default, as OML.
  DistanceKind retrieval_distance = DistanceKind::euclidean;
  std::optional<ComponentSpec> pairwise_model;
  bool hard_pairs_mining = true;
  std::string embeddings_cache_dir;
  int64_t batch_size_inference = 128;  ///< also OML's `bs` (its predict configs' batch size)
  std::string embeddings;              ///< validation on precomputed embeddings (.pt / .npy)
  std::string data_dir;                ///< prediction input folder
  std::string save_dir;                ///< prediction output folder
  std::string weights;                 ///< checkpoint for validation / prediction
  /// OML's pairwise post-processing configs name the extractor's and the re-ranker's weights in
  /// these two keys and use them through `${extractor_weights}` / `${postprocessor_weights}`:
  /// kept as given (read where the interpolations point), so that a user's `--set
  /// extractor_weights=...` reaches every place that names it.
  std::string extractor_weights, postprocessor_weights;
  /// OML's `show_dataset_warnings` (default true): false silences the dataframe's warnings
  /// (labels with several categories), as OML's `verbose=False` does.
  bool show_dataset_warnings = true;
  /// Folder where zoo names (`weights: vits16_dino`) are looked up; "" = $OML_WEIGHTS_DIR, else
  /// ~/.cache/oml (oml/models/zoo.h).
  std::string weights_dir;

  Node source;  ///< the resolved root node, for messages from later stages
  /// Every component above parsed by its registry, and the metric table: set by
  /// cli::Invocation::load_config once the whole config checked out (null after
  /// parse_run_config alone). The pipelines build from it (pipelines::parsed_components).
  std::shared_ptr<const ParsedComponents> components;
};

/// Reads `text` ("FROM:TO", or "N" for one step; 1 <= FROM <= TO) into `range`; returns the
/// problem ("" when none), for the config key and oml-train's --profile alike.
std::string parse_step_range(const std::string& text, StepRange& range);

/// Parses the resolved document's root. Throws ConfigError on unknown keys, wrong types and
/// bad enumerations (pipeline, accelerator, precision, mode_for_checkpointing, scheduler_interval,
/// ddp.gradient_compression) — all
/// of them at once (ConfigErrors) when there are several.
RunConfig parse_run_config(const Node& root);

/// The same, collecting the problems in `errors` instead of throwing: what could not be read
/// keeps its default. For callers that check more before reporting (cli::Invocation::load_config).
RunConfig parse_run_config(const Node& root, ErrorList& errors);

/// `error` as the config error of its key in the resolved document `root` ("file:line:col:
/// key: message"; the key's parent, or the key's path alone, when the config does not spell it).
ConfigError place_setting_error(const Node& root, const SettingError& error);

/// Runs `work`; a SettingError it throws comes out placed at its key in `root`.
template <class Work>
auto placing_settings(const Node& root, Work&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const SettingError& e) {
    throw place_setting_error(root, e);
  }
}

}  // namespace oml::config
