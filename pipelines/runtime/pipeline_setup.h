#pragma once
// Building the parts of a pipeline from the typed config, with errors that point at the key.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/config/run_config.h"
#include "oml/data/dataframe.h"
#include "oml/data/image.h"
#include "oml/registry/parsed_components.h"
#include "runtime/run_inputs.h"

namespace oml::data {
class ImageDataset;
class Sampler;
class Transform;
struct SamplerContext;
}  // namespace oml::data
namespace oml::ddp {
struct DdpSamplerOptions;
}  // namespace oml::ddp
namespace oml::models {
class Extractor;
struct BackboneFreezing;
}  // namespace oml::models
namespace oml::metrics {
struct EmbeddingMetricsOptions;
class MetricTable;
}  // namespace oml::metrics
namespace oml::optim {
class Scheduler;
}  // namespace oml::optim
namespace oml::retrieval {
class RetrievalBackend;
}  // namespace oml::retrieval
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace oml::pipelines {

struct RunContext;

/// The config's components as cli::check_components parsed them (RunConfig::components, set by
/// cli::Invocation::load_config): every pipeline builds from these, never from the args again.
/// InternalError for a config that did not come through load_config.
const ParsedComponents& parsed_components(const config::RunConfig& config);
/// The run's metric table, configured once by load_config (ParsedComponents::metrics).
const metrics::MetricTable& configured_metrics(const config::RunConfig& config);

/// A ConfigError saying the pipeline needs `key` (absent or empty in the config), at its place.
[[noreturn]] void fail_missing_component(const config::RunConfig& config, const std::string& key);

/// The component in `slot` (a ComponentSpec, or its parse from parsed_components()), or a
/// ConfigError saying the pipeline needs `key`.
template <class Component>
const Component& require_component(const config::RunConfig& config, const std::optional<Component>& slot,
                                   const std::string& key) {
  if (!slot) fail_missing_component(config, key);
  return *slot;
}

/// dataset_root / dataframe_name, read and validated (DataError naming file, line, column).
/// `require_items`: every row names its item — a `path` (images, which must exist) or, in a text
/// dataframe (a `text` column and no `path`), a `text`; false: neither is required (precomputed
/// embeddings, oml-sampler). Which kind the run's extractor reads is checked by run_inputs().
data::Dataframe read_run_dataframe(const config::RunConfig& config, bool require_items);
/// The bounds the run's images are decoded within (max_image_pixels).
data::ImageLimits image_limits(const config::RunConfig& config);

/// The transform parsed into `slot` (one of parsed_components()'s), or a ConfigError saying the
/// pipeline needs `key`.
std::shared_ptr<const data::Transform> build_transform(const config::RunConfig& config,
                                                       const std::optional<ParsedComponents::Transform>& slot,
                                                       const std::string& key);

/// Labels (0..L-1), categories, seed and bs_train of the train split, for the sampler.
data::SamplerContext sampler_context_for(const config::RunConfig& config, const data::Dataframe& dataframe);

/// The config's dataframe with items (read_run_dataframe), limited by limit_val_batches;
/// DataError when it has no train rows.
data::Dataframe read_training_dataframe(const config::RunConfig& config);

/// The config's sampler over the train split, not wrapped: the Trainer deals its epochs out to
/// the ranks (TrainingParts::sampler).
std::shared_ptr<const data::Sampler> build_train_sampler(const config::RunConfig& config,
                                                         const data::Dataframe& dataframe);

/// The sampling part of the config's `ddp:` section, for the DDP plugin's DDPSamplerWrapper.
ddp::DdpSamplerOptions ddp_sampler_options(const config::RunConfig& config);

/// The config's optimizer over `model`'s parameters and (with their own learning rate, when the
/// optimizer's args give one) `loss`'s (null: a loss without parameters).
std::shared_ptr<torch::optim::Optimizer> build_optimizer(const config::RunConfig& config,
                                                         const torch::nn::Module& model,
                                                         const torch::nn::Module* loss);

/// The steps the run will train: max_steps, or max_epochs x `steps_per_epoch` when smaller or
/// max_steps is unset. Saturates at int64's largest value rather than overflowing: max_epochs may
/// be as large as int64 allows, with max_steps or a time limit ending the run.
int64_t total_training_steps(const config::RunConfig& config, int64_t steps_per_epoch);

/// The config's scheduler over `optimizer` (null when none is configured), told how many times it
/// will be stepped: total_training_steps (interval `step`) or max_epochs (interval `epoch`),
/// divided by scheduler_frequency.
std::shared_ptr<optim::Scheduler> build_scheduler(const config::RunConfig& config,
                                                  torch::optim::Optimizer& optimizer,
                                                  int64_t steps_per_epoch);

/// Which epochs `extractor`'s backbone is frozen in: the top-level `freeze_n_epochs` merged with
/// what the extractor's own args ask for (extractor_with_mlp's `freeze_n_epochs`,
/// `train_backbone: false`). ConfigError when the two give different epoch counts, or when
/// freezing is asked of an extractor without a separate backbone.
models::BackboneFreezing backbone_freezing(const config::RunConfig& config,
                                           const models::Extractor& extractor);

/// Moves `model` to the context's device and lays out its convolution weights in the config's
/// `memory_format` (models::set_memory_format): every pipeline places its models through here.
void place_model(torch::nn::Module& model, const config::RunConfig& config, const RunContext& context);

/// The config's extractor (with its `weights:` loaded by its build).
std::shared_ptr<models::Extractor> build_extractor(const config::RunConfig& config);

/// The config's extractor with top-level `weights:` (an oml-cpp checkpoint or a torch.save file)
/// loaded over it when given, placed on the context's device (place_model).
std::shared_ptr<models::Extractor> build_extractor_with_weights(const config::RunConfig& config,
                                                                const RunContext& context);

/// The config's `retrieval_backend` (`exact` when absent), seeded by the run's seed.
std::shared_ptr<const retrieval::RetrievalBackend> build_retrieval_backend(const config::RunConfig& config);

/// Builds the backend once (a Faiss backend in a build without Faiss is a ConfigError) and checks
/// that it can serve the configured metrics: fnmr@fmr needs `exact` (ConfigError at the key).
void check_retrieval_backend(const config::RunConfig& config);

/// Points `options` at `backend` (which must outlive them) with the config's report_recall.
void use_retrieval_backend(const config::RunConfig& config, const retrieval::RetrievalBackend& backend,
                           metrics::EmbeddingMetricsOptions& options);

/// SettingError unless metric_for_checkpointing names a metric validation computes: an OVERALL
/// key of `overall_keys`, or a category's key of such a stem ("<category>/cmc/1" beside
/// "OVERALL/cmc/1"; whether the category exists is known at the first validation).
void check_checkpoint_metric(const config::RunConfig& config, const std::vector<std::string>& overall_keys);

/// What a scheduler's scheduling.monitor_metric names.
enum class MonitoredValue {
  validation_metric,  ///< stepped at validation epochs with rank 0's computed value
  training_loss,      ///< stepped at epoch ends with the epoch's mean training loss
};
/// The key under which the epoch mean of the training loss `loss_name` (losses::training_loss_name)
/// can be monitored: "<loss_name>_epoch", Lightning's name for what OML logs on_epoch (an OML
/// config's `monitor_metric: triplet_loss_epoch`); Lightning's callback metrics also carry it
/// under `loss_name` itself, which is accepted too.
std::string training_loss_epoch_key(const std::string& loss_name);
/// Checks scheduling.monitor_metric (required by schedulers that monitor a metric) before
/// training: a validation metric as for metric_for_checkpointing, or the training loss's epoch
/// mean; SettingError for anything else, listing both kinds.
MonitoredValue check_monitor_metric(const config::RunConfig& config,
                                    const std::vector<std::string>& overall_keys,
                                    const std::string& loss_name);
/// Same as check_checkpoint_metric for early_stopping.monitor (when early stopping is configured).
void check_early_stopping_metric(const config::RunConfig& config,
                                 const std::vector<std::string>& overall_keys);

/// What oml-predict (and oml-index, oml-search) embed with `extractor`:
/// - an image extractor: the images of `data_dir` (a folder, sorted paths), or else every row of
///   the dataframe in file order, through the prediction transform;
/// - a text extractor: the lines of `data_dir` (a UTF-8 file, one text per line:
///   data::read_text_lines), or else every row of the text dataframe in file order, through the
///   extractor's tokenizer (run_inputs; the image settings transforms_predict and transforms_val
///   are refused at their keys).
/// ConfigError at `data_dir` when it is not what the extractor reads (a folder of images, a file
/// of texts); the dataframe's and run_inputs' errors otherwise.
struct PredictionInput {
  RunInputs inputs;
  std::shared_ptr<data::Dataset> dataset;
  /// From a dataframe: its rows (paths or texts; labels as written in `original_labels`,
  /// categories where it has them); empty for a folder or a file of lines.
  data::DataSplit rows;
  /// What each item is, in dataset order: its image's path, or its text.
  const std::vector<std::string>& sources() const;
};
PredictionInput prediction_input(const config::RunConfig& config, const models::Extractor& extractor);

}  // namespace oml::pipelines
