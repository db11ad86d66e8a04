#pragma once
// What the rows of a run's dataframe give its extractor: images (the `path` column, through the
// configured transforms), texts (the `text` column of a text dataframe, through the extractor's
// own tokenizer) or audio (the `path` column naming audio files, cut as `audio:` says), decided
// by Extractor::input() and checked against the dataframe and the config before any item is
// loaded (docs/data.md#text-dataframes, docs/data.md#audio-dataframes).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/config/run_config.h"
#include "oml/data/audio_dataset.h"
#include "oml/models/text_input.h"
#include "oml/registry/parsed_components.h"
#include "runtime/row_input.h"

namespace oml::data {
class Dataframe;
class Dataset;
struct DataSplit;
struct TextDatasetOptions;
}  // namespace oml::data
namespace oml::models {
class Extractor;
}  // namespace oml::models
namespace oml::text {
class Tokenizer;
}  // namespace oml::text

namespace oml::pipelines {

struct RunInputs {
  RowInput kind = RowInput::images;
  /// Texts only: what the extractor said (TextInputSource) and its tokenizer, read once and set
  /// up for the model's length (data::prepare_tokenizer), shared by the run's text datasets.
  std::optional<models::TextInputSpec> text;
  std::shared_ptr<const text::Tokenizer> tokenizer;
  /// Audio only: how files become items (the config's `audio:`); `source` is set per dataset.
  std::optional<data::AudioDatasetOptions> audio;

  /// The progress bars' unit: "img", "text" or "clip".
  std::string unit() const;
};

/// The run's inputs for `extractor` over `dataframe` (as read_run_dataframe read it):
/// - an image extractor takes images; a text dataframe (`text`, no `path`) is a ConfigError at
///   `extractor` naming both;
/// - a text extractor (input() == tokens) takes the dataframe's texts: ConfigError at
///   `extractor` naming both when the dataframe has no `text` column, or when the extractor is no
///   TextInputSource (it does not say which tokenizer); DataError when the tokenizer file does
///   not exist; the tokenizer's own ConfigError when it cannot be read;
/// - an audio extractor (input() == audio) takes the files the dataframe's `path` names
///   (audio_inputs); a text dataframe is a ConfigError at `extractor`.
/// A text or audio run is a ConfigError at each of `image_keys` the config sets
/// (`transforms_train`, `transforms_val`, `log_images: true`: image-only settings it would
/// silently ignore); a run that reads no audio is one at `audio:` when the config sets it.
RunInputs run_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                     const data::Dataframe& dataframe, const std::vector<std::string>& image_keys);

/// The inputs of an image extractor without a dataframe (oml-predict's folder of images): a
/// ConfigError at `audio:` when the config sets it.
RunInputs image_inputs(const config::RunConfig& config, const models::Extractor& extractor);

/// The text inputs of `extractor`, which reads texts (ConfigError at `extractor` otherwise): its
/// TextInputSpec and its tokenizer, read once. `texts` names where the texts come from, for the
/// log. ConfigError at each of `image_keys` the config sets; ConfigError when the extractor is
/// no TextInputSource; DataError when the tokenizer file does not exist; the tokenizer's own
/// ConfigError when it cannot be read.
RunInputs text_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                      const std::string& texts, const std::vector<std::string>& image_keys);

/// The audio inputs of `extractor`, which reads audio (ConfigError at `extractor` otherwise): the
/// config's `audio:` options. ConfigError at `audio.sample_rate` when it is not the extractor's
/// rate, at `extractor` when the extractor does not say its rate (no AudioInputSource), and at
/// each of `image_keys` the config sets. `source` names the files for the log.
RunInputs audio_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                       const std::string& source, const std::vector<std::string>& image_keys);

/// How a TextDataset of `inputs` (text inputs) tokenizes and packs; `source` names the texts.
data::TextDatasetOptions text_dataset_options(const RunInputs& inputs, const std::string& source);

/// How an AudioDataset of `inputs` (audio inputs) cuts its files; `source` names them.
data::AudioDatasetOptions audio_dataset_options(const RunInputs& inputs, const std::string& source);

/// The dataset of `split` (rows of `dataframe`) for `inputs`: an ImageDataset through the
/// transform parsed into `transform_slot` (ConfigError at `transform_key` when the config has
/// none), a TextDataset with the inputs' tokenizer, or an AudioDataset.
std::shared_ptr<data::Dataset> run_dataset(const config::RunConfig& config, const RunInputs& inputs,
                                           const data::Dataframe& dataframe, const data::DataSplit& split,
                                           const std::optional<ParsedComponents::Transform>& transform_slot,
                                           const std::string& transform_key);

/// For what embeds images only (the pairwise pipelines, named by `command`): a ConfigError at
/// `extractor` when it reads texts or audio, and at `audio:` when the config sets it.
void require_image_extractor(const config::RunConfig& config, const models::Extractor& extractor,
                             const std::string& command);

}  // namespace oml::pipelines
