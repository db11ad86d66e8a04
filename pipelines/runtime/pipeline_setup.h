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

namespace oml::data {
class ImageDataset;
class Sampler;
class Transform;
struct SamplerContext;
}  // namespace oml::data
namespace oml::models {
class Extractor;
struct BackboneFreezing;
}  // namespace oml::models
namespace oml::metrics {
struct EmbeddingMetricsOptions;
}  // namespace oml::metrics
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

/// The component in `slot`, or a ConfigError saying the pipeline needs `key`.
config::ComponentSpec require_component(const config::RunConfig& config,
                                        const std::optional<config::ComponentSpec>& slot,
                                        const std::string& key);

/// dataset_root / dataframe_name, read and validated (DataError naming file, line, column).
data::Dataframe read_run_dataframe(const config::RunConfig& config, bool require_paths);
/// The bounds the run's images are decoded within (max_image_pixels).
data::ImageLimits image_limits(const config::RunConfig& config);

std::shared_ptr<const data::Transform> build_transform(const config::RunConfig& config,
                                                       const std::optional<config::ComponentSpec>& slot,
                                                       const std::string& key);

/// Labels (0..L-1), categories, seed and bs_train of the train split, for the sampler.
data::SamplerContext sampler_context_for(const config::RunConfig& config, const data::Dataframe& dataframe);

/// The train split of the config's dataframe (DataError when it has no train rows).
data::Dataframe read_training_dataframe(const config::RunConfig& config);

/// The config's sampler over the train split, not wrapped: the Trainer deals its epochs out to
/// the ranks (TrainingParts::sampler).
std::shared_ptr<const data::Sampler> build_train_sampler(const config::RunConfig& config,
                                                         const data::Dataframe& dataframe);

/// The config's optimizer over `model`'s parameters and (with their own learning rate, when the
/// optimizer's args give one) `loss`'s (null: a loss without parameters).
std::shared_ptr<torch::optim::Optimizer> build_optimizer(const config::RunConfig& config,
                                                         const torch::nn::Module& model,
                                                         const torch::nn::Module* loss);

/// Which epochs `extractor`'s backbone is frozen in: the top-level `freeze_n_epochs` merged with
/// what the extractor's own args ask for (extractor_with_mlp's `freeze_n_epochs`,
/// `train_backbone: false`). ConfigError when the two give different epoch counts, or when
/// freezing is asked of an extractor without a separate backbone.
models::BackboneFreezing backbone_freezing(const config::RunConfig& config,
                                           const models::Extractor& extractor);

/// The config's extractor (with its `weights:` loaded by its build).
std::shared_ptr<models::Extractor> build_extractor(const config::RunConfig& config);

/// The config's extractor with top-level `weights:` (an oml-cpp checkpoint or a torch.save file)
/// loaded over it when given, on the context's device.
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

/// SettingError when metric_for_checkpointing names an OVERALL metric that metric_args do not
/// compute (category keys are checked at the first validation, when categories are known).
void check_checkpoint_metric(const config::RunConfig& config, const std::vector<std::string>& overall_keys);
/// Same for scheduling.monitor_metric (required by schedulers that monitor a metric).
void check_monitor_metric(const config::RunConfig& config, const std::vector<std::string>& overall_keys);
/// Same for early_stopping.monitor (when early stopping is configured).
void check_early_stopping_metric(const config::RunConfig& config,
                                 const std::vector<std::string>& overall_keys);

/// What oml-predict (and oml-index, oml-search) embed: the images of `data_dir` (sorted paths),
/// or else every row of the dataframe in file order, with the prediction transform.
struct PredictionInput {
  std::shared_ptr<data::ImageDataset> dataset;
  /// From a dataframe: its rows (paths; labels as written in `original_labels`, categories
  /// where it has them); empty for a folder.
  data::DataSplit rows;
};
PredictionInput prediction_input(const config::RunConfig& config);

}  // namespace oml::pipelines
