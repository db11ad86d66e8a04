#include "runtime/pipeline_setup.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/data/audio_dataset.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/sampler.h"
#include "oml/data/text_dataset.h"
#include "oml/data/transform.h"
#include "oml/ddp/epoch_position.h"
#include "oml/distributed/device.h"
#include "oml/distributed/world.h"
#include "oml/io/state_dict.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/metric_table.h"
#include "oml/models/extractor.h"
#include "oml/models/memory_format.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/distance_space.h"
#include "oml/samplers/builtin_samplers.h"
#include "runtime/run_context.h"
#include "runtime/run_dir.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

const ParsedComponents& parsed_components(const config::RunConfig& config) {
  OML_ASSERT(config.components != nullptr,
             "a pipeline was given a RunConfig that cli::Invocation::load_config did not check");
  return *config.components;
}

const metrics::MetricTable& configured_metrics(const config::RunConfig& config) {
  const ParsedComponents& components = parsed_components(config);
  OML_ASSERT(components.metrics != nullptr, "the run's metric table was not configured");
  return *components.metrics;
}

void fail_missing_component(const config::RunConfig& config, const std::string& key) {
  // Present but empty (`extractor:` or `--set extractor=`): point at that line or flag.
  const config::Node given = config.source[key];
  (given.defined() ? given : config.source)
      .fail("the '" + config::name(config.pipeline) + "' pipeline needs '" + key +
            ": {name: ..., args: {...}}'");
}

data::ImageLimits image_limits(const config::RunConfig& config) {
  data::ImageLimits limits;
  limits.max_pixels = config.max_image_pixels;
  return limits;
}

data::Dataframe read_run_dataframe(const config::RunConfig& config, bool require_items) {
  if (config.dataset_root.empty()) {
    const config::Node given = config.source["dataset_root"];
    (given.defined() ? given : config.source).fail("the pipeline needs 'dataset_root' (the dataset folder)");
  }
  const fs::path root = config.dataset_root;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    config.source["dataset_root"].fail("dataset folder '" + root.string() + "' does not exist");
  }
  const fs::path csv = root / config.dataframe_name;
  if (!fs::exists(csv, ec)) {
    config.source.fail("dataframe '" + csv.string() + "' does not exist (dataset_root / dataframe_name)");
  }
  data::DataframeOptions options;
  options.dataset_root = root;
  options.require_paths = require_items;
  options.accept_text_dataframes = require_items;
  options.check_files = require_items;
  options.warnings = config.show_dataset_warnings;
  return data::Dataframe::read(csv, options);
}

std::shared_ptr<const data::Transform> build_transform(const config::RunConfig& config,
                                                       const std::optional<ParsedComponents::Transform>& slot,
                                                       const std::string& key) {
  return registries().transforms.build(require_component(config, slot, key));
}

data::SamplerContext sampler_context_for(const config::RunConfig& config, const data::Dataframe& dataframe) {
  const data::DataSplit& train = dataframe.train();
  data::SamplerContext context;
  context.labels = train.labels;
  context.categories = train.categories;
  // label_values[l] = the dataframe's value of remapped label l.
  context.label_values.assign(static_cast<std::size_t>(train.num_labels()), 0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    context.label_values[static_cast<std::size_t>(train.labels[i])] = train.original_labels[i];
  }
  context.seed = config.seed;
  context.default_batch_size = config.bs_train;
  context.source = "the train split of " + dataframe.file();
  return context;
}

data::Dataframe read_training_dataframe(const config::RunConfig& config) {
  data::Dataframe dataframe = read_run_dataframe(config, /*require_items=*/true);
  if (dataframe.train().empty()) {
    throw DataError(dataframe.file() + ": has no rows with split 'train'; training needs some");
  }
  // limit_val_batches: the first batches of the validation loader (bs_val rows each, in the
  // dataframe's order), as Lightning's; 0 batches leave nothing to validate.
  const config::BatchLimit& limit = config.controls.limit_val_batches;
  const std::size_t rows = dataframe.validation().size();
  if (limit.limits() && rows > 0) {
    const auto bs = static_cast<std::size_t>(config.bs_val);
    const auto batches = static_cast<int64_t>((rows + bs - 1) / bs);
    const int64_t kept = limit.apply(batches, "limit_val_batches");
    dataframe.keep_first_validation_rows(std::min(rows, static_cast<std::size_t>(kept) * bs));
    log::info("limit_val_batches: validating on " + std::to_string(kept) + " of " + std::to_string(batches) +
              " batches (" + std::to_string(dataframe.validation().size()) + " of " + std::to_string(rows) +
              " validation rows)");
  }
  return dataframe;
}

std::shared_ptr<const data::Sampler> build_train_sampler(const config::RunConfig& config,
                                                         const data::Dataframe& dataframe) {
  return samplers::build_sampler(parsed_components(config).sampler, sampler_context_for(config, dataframe));
}

ddp::DdpSamplerOptions ddp_sampler_options(const config::RunConfig& config) {
  return ddp::DdpSamplerOptions{config.ddp.shuffle_between_ranks, config.ddp.pad_to_world_size};
}

std::shared_ptr<torch::optim::Optimizer> build_optimizer(const config::RunConfig& config,
                                                         const torch::nn::Module& model,
                                                         const torch::nn::Module* loss) {
  optim::OptimizerContext context;
  for (const auto& p : model.parameters()) context.model_parameters.push_back(p);
  if (loss) {
    for (const auto& p : loss->parameters()) context.loss_parameters.push_back(p);
  }
  return registries().optimizers.build(
      require_component(config, parsed_components(config).optimizer, "optimizer"), context);
}

int64_t total_training_steps(const config::RunConfig& config, int64_t steps_per_epoch) {
  int64_t all_epochs = 0;
  if (__builtin_mul_overflow(steps_per_epoch, config.max_epochs, &all_epochs)) {
    all_epochs = std::numeric_limits<int64_t>::max();
  }
  return config.max_steps ? std::min(*config.max_steps, all_epochs) : all_epochs;
}

std::shared_ptr<optim::Scheduler> build_scheduler(const config::RunConfig& config,
                                                  torch::optim::Optimizer& optimizer,
                                                  int64_t steps_per_epoch) {
  if (!config.scheduling.scheduler) return nullptr;
  const bool per_step = config.scheduling.scheduler_interval == config::SchedulerInterval::step;
  optim::SchedulerContext context;
  context.optimizer = &optimizer;
  context.total_steps = (per_step ? total_training_steps(config, steps_per_epoch) : config.max_epochs) /
                        config.scheduling.scheduler_frequency;
  return registries().schedulers.build(*parsed_components(config).scheduler, context);
}

models::BackboneFreezing backbone_freezing(const config::RunConfig& config,
                                           const models::Extractor& extractor) {
  models::BackboneFreezing freezing = extractor.requested_freezing();
  if (config.freeze_n_epochs == 0) return freezing;
  const config::Node key = config.source["freeze_n_epochs"];
  if (!extractor.freezable()) {
    key.fail(
        "freezing needs an extractor with a separate backbone: use extractor_with_mlp (its backbone is "
        "frozen during the first freeze_n_epochs epochs), not '" +
        config.extractor->name + "'");
  }
  if (freezing.epochs > 0 && freezing.epochs != config.freeze_n_epochs) {
    key.fail("freeze_n_epochs: " + std::to_string(config.freeze_n_epochs) +
             " here, but the extractor's args say " + "freeze_n_epochs: " + std::to_string(freezing.epochs) +
             "; keep one of them");
  }
  freezing.epochs = config.freeze_n_epochs;
  return freezing;
}

std::shared_ptr<models::Extractor> build_extractor(const config::RunConfig& config) {
  return registries().extractors.build(
      require_component(config, parsed_components(config).extractor, "extractor"));
}

std::shared_ptr<models::Extractor> build_extractor_with_weights(const config::RunConfig& config,
                                                                const RunContext& context) {
  auto extractor = build_extractor(config);
  if (const auto reader = std::dynamic_pointer_cast<models::OmlWeightsReader>(extractor);
      reader && !config.weights.empty()) {
    // A published file of the model's family, an OML .ckpt, a zoo name or an oml-cpp checkpoint,
    // as OML reads them (vit, vit_clip).
    reader->load_weights(config.weights);
    log::info("loaded extractor weights from " + config.weights);
  } else if (!config.weights.empty()) {
    if (!fs::exists(config.weights))
      config.source["weights"].fail("weights file '" + config.weights + "' does not exist");
    io::load_weights(*extractor, config.weights);
    log::info("loaded extractor weights from " + config.weights);
  }
  place_model(*extractor, config, context);
  return extractor;
}

void place_model(torch::nn::Module& model, const config::RunConfig& config, const RunContext& context) {
  model.to(context.device);
  if (config.memory_format == config::MemoryFormat::channels_last) {
    models::set_memory_format(model, at::MemoryFormat::ChannelsLast);
  }
}

namespace {
/// Whether validation can produce `key`: an OVERALL key, or "<category>/<stem>" of one.
bool validation_may_compute(const std::string& key, const std::vector<std::string>& overall_keys) {
  const auto computed = [&](const std::string& k) {
    return std::find(overall_keys.begin(), overall_keys.end(), k) != overall_keys.end();
  };
  if (starts_with(key, "OVERALL/")) return computed(key);
  const auto slash = key.find('/');
  return slash != std::string::npos && slash > 0 && computed("OVERALL" + key.substr(slash));
}

void check_metric_key(const std::string& setting, const std::string& key,
                      const std::vector<std::string>& overall_keys) {
  if (validation_may_compute(key, overall_keys)) return;
  throw SettingError(setting, "'" + key + "' is not computed with these metric_args" +
                                  did_you_mean(key, overall_keys) + "; computed: " + join(overall_keys) +
                                  " (and the same per category, as <category>/cmc/1)");
}
}  // namespace

void check_checkpoint_metric(const config::RunConfig& config, const std::vector<std::string>& overall_keys) {
  check_metric_key("metric_for_checkpointing", config.metric_for_checkpointing, overall_keys);
}

std::string training_loss_epoch_key(const std::string& loss_name) { return loss_name + "_epoch"; }

MonitoredValue check_monitor_metric(const config::RunConfig& config,
                                    const std::vector<std::string>& overall_keys,
                                    const std::string& loss_name) {
  const std::string& key = config.scheduling.monitor_metric;
  if (key.empty()) {
    throw SettingError(
        "scheduling", "this scheduler monitors a metric: set scheduling.monitor_metric (e.g. OVERALL/cmc/1)");
  }
  const std::string epoch_key = training_loss_epoch_key(loss_name);
  if (key == epoch_key || key == loss_name) return MonitoredValue::training_loss;
  if (validation_may_compute(key, overall_keys)) return MonitoredValue::validation_metric;
  std::vector<std::string> known = overall_keys;
  known.push_back(epoch_key);
  throw SettingError("scheduling.monitor_metric",
                     "'" + key + "' is neither a metric validation computes nor the training loss" +
                         did_you_mean(key, known) + "; validation computes " + join(overall_keys) +
                         " (and the same per category, as <category>/cmc/1); the training loss's epoch "
                         "mean is '" +
                         epoch_key + "'");
}

void check_early_stopping_metric(const config::RunConfig& config,
                                 const std::vector<std::string>& overall_keys) {
  if (config.controls.early_stopping)
    check_metric_key("early_stopping.monitor", config.controls.early_stopping->monitor, overall_keys);
}

std::shared_ptr<const retrieval::RetrievalBackend> build_retrieval_backend(const config::RunConfig& config) {
  if (!config.retrieval_backend) return retrieval::make_exact_backend();
  retrieval::BackendContext context;
  context.seed = static_cast<uint64_t>(config.seed);
  if (config.accelerator != config::Accelerator::cpu) {
    // The device start_run() will use (same placement, same errors, only earlier).
    const c10::Device device =
        distributed::placement_for(config.accelerator, distributed::world_from_environment(),
                                   config.device_ids)
            .device;
    if (device.is_cuda()) context.cuda_device = device.index();
  }
  auto backend = registries().retrieval_backends.build(*parsed_components(config).retrieval_backend, context);
  if (!backend->supports(retrieval::engine_measure(config.retrieval_distance))) {
    config.retrieval_backend->node["distance"].fail(
        "retrieval backend '" + backend->name() + "' searches by Euclidean distance only, not by " +
        to_string(config.retrieval_distance) + " (exact and the faiss_* backends search by every distance)");
  }
  return backend;
}

void check_retrieval_backend(const config::RunConfig& config) {
  const auto backend = build_retrieval_backend(config);
  if (backend->exact()) return;
  if (configured_metrics(config).needs_pair_pass()) {
    config.retrieval_backend->node["name"].fail(
        "fnmr@fmr (metric_args.fmr_vals) needs the distances of all query-gallery pairs, which only the "
        "retrieval backend 'exact' computes; use retrieval_backend: {name: exact} for fnmr, or remove "
        "fmr_vals to use '" +
        backend->name() + "'");
  }
}

void use_retrieval_backend(const config::RunConfig& config, const retrieval::RetrievalBackend& backend,
                           metrics::EmbeddingMetricsOptions& options) {
  options.backend = &backend;
  options.distance = config.retrieval_distance;
  options.report_recall = backend.exact() ? 0 : config.report_recall;
  options.recall_seed = static_cast<uint64_t>(config.seed);
}

namespace {

/// Rows of the whole dataframe in file order (train and validation rows alike), for prediction.
data::DataSplit all_rows_in_file_order(const data::Dataframe& dataframe) {
  struct Row {
    int64_t line;
    const data::DataSplit* split;
    std::size_t index;
  };
  std::vector<Row> rows;
  for (const data::DataSplit* split : {&dataframe.train(), &dataframe.validation()}) {
    for (std::size_t i = 0; i < split->size(); ++i) rows.push_back({split->lines[i], split, i});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.line < b.line; });
  data::DataSplit out;
  const bool bboxes = dataframe.train().has_bboxes() || dataframe.validation().has_bboxes();
  const bool categories = dataframe.train().has_categories() || dataframe.validation().has_categories();
  const bool start_times = dataframe.train().has_start_times() || dataframe.validation().has_start_times();
  for (const Row& row : rows) {
    if (row.split->has_paths()) out.paths.push_back(row.split->paths[row.index]);
    if (row.split->has_texts()) out.texts.push_back(row.split->texts[row.index]);
    if (start_times)
      out.start_times.push_back(row.split->has_start_times() ? row.split->start_times[row.index] : 0.0);
    out.lines.push_back(row.line);
    // Labels as written in the file (the train split's are remapped to 0..L-1).
    if (!row.split->original_labels.empty())
      out.original_labels.push_back(row.split->original_labels[row.index]);
    if (categories)
      out.categories.push_back(row.split->has_categories() ? row.split->categories[row.index] : "");
    if (bboxes) out.bboxes.push_back(row.split->has_bboxes() ? row.split->bboxes[row.index] : std::nullopt);
  }
  if (out.original_labels.size() != out.size()) out.original_labels.clear();
  return out;
}

}  // namespace

const std::vector<std::string>& PredictionInput::sources() const {
  const data::DataSplit& items = dataset->meta();
  return inputs.kind == RowInput::texts ? items.texts : items.paths;
}

namespace {

/// oml-predict's `data_dir`: a folder of images or audio files, or a UTF-8 file of texts.
PredictionInput prediction_input_from_data_dir(
    const config::RunConfig& cfg, const models::Extractor& extractor,
    const std::function<std::shared_ptr<const data::Transform>()>& transform) {
  const config::Node node = cfg.source["data_dir"];
  PredictionInput input;
  const models::ExtractorInput reads = extractor.input();
  if (reads == models::ExtractorInput::tokens) {
    if (!fs::is_regular_file(cfg.data_dir)) {
      node.fail(
          "'" + cfg.data_dir + "' " +
          (fs::is_directory(cfg.data_dir) ? std::string("is a folder") : std::string("does not exist")) +
          "; the extractor reads texts, and data_dir names a UTF-8 file of them, one per line");
    }
    input.inputs = text_inputs(cfg, extractor, cfg.data_dir, {"transforms_predict", "transforms_val"});
    input.dataset =
        std::make_shared<data::TextDataset>(data::read_text_lines(cfg.data_dir), input.inputs.tokenizer,
                                            text_dataset_options(input.inputs, cfg.data_dir));
    return input;
  }
  const std::string what = reads == models::ExtractorInput::audio ? "audio files" : "images";
  if (fs::is_regular_file(cfg.data_dir)) {
    node.fail("'" + cfg.data_dir + "' is a file; the extractor reads " + what +
              ", and data_dir names a folder of them");
  }
  if (!fs::is_directory(cfg.data_dir)) node.fail("folder '" + cfg.data_dir + "' does not exist");
  if (reads == models::ExtractorInput::audio) {
    input.inputs = audio_inputs(cfg, extractor, cfg.data_dir, {"transforms_predict", "transforms_val"});
    input.dataset =
        data::AudioDataset::from_folder(cfg.data_dir, audio_dataset_options(input.inputs, cfg.data_dir));
    return input;
  }
  input.inputs = image_inputs(cfg, extractor);
  input.dataset = data::ImageDataset::from_folder(cfg.data_dir, transform(), image_limits(cfg));
  return input;
}

}  // namespace

PredictionInput prediction_input(const config::RunConfig& cfg, const models::Extractor& extractor) {
  const ParsedComponents& parsed = parsed_components(cfg);
  const auto transform = [&] {
    return build_transform(cfg, parsed.transforms_predict ? parsed.transforms_predict : parsed.transforms_val,
                           "transforms_predict");
  };
  if (!cfg.data_dir.empty()) return prediction_input_from_data_dir(cfg, extractor, transform);
  const data::Dataframe dataframe = read_run_dataframe(cfg, /*require_items=*/true);
  PredictionInput input;
  input.inputs = run_inputs(cfg, extractor, dataframe, {"transforms_predict", "transforms_val"});
  input.rows = all_rows_in_file_order(dataframe);
  if (input.inputs.kind == RowInput::images) {
    input.dataset = std::make_shared<data::ImageDataset>(input.rows, transform(), image_limits(cfg));
  } else {
    input.dataset = run_dataset(cfg, input.inputs, dataframe, input.rows, std::nullopt, "transforms_predict");
  }
  return input;
}

}  // namespace oml::pipelines
