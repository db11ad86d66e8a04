#include "runtime/run_inputs.h"

#include <filesystem>
#include <system_error>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/text_dataset.h"
#include "oml/models/extractor.h"
#include "oml/text/tokenizer.h"
#include "runtime/pipeline_setup.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

std::string extractor_name(const config::RunConfig& config) {
  return config.extractor ? "extractor '" + config.extractor->name + "'" : "the extractor";
}

/// Where messages about the extractor point: its key, else the config as a whole.
config::Node extractor_node(const config::RunConfig& config) {
  const config::Node node = config.source["extractor"];
  return node.defined() ? node : config.source;
}

/// A ConfigError at each of `keys` the config sets: image settings a text run would ignore.
void refuse_image_settings(const config::RunConfig& config, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    const config::Node node = config.source[key];
    const bool set = key == "log_images" ? config.log_images : !node.is_null();
    if (!set) continue;
    (node.defined() ? node : config.source)
        .fail("'" + key + "' is an image setting, and this run reads texts (" + extractor_name(config) +
              " takes tokens, made by its own tokenizer.json): remove it");
  }
}

}  // namespace

void refuse_audio_extractor(const config::RunConfig& config, const models::Extractor& extractor) {
  if (extractor.input() != models::ExtractorInput::audio) return;
  extractor_node(config).fail(extractor_name(config) +
                              " reads audio, and the commands do not feed audio yet (the library reads "
                              "audio dataframes: docs/data.md#audio-dataframes)");
}

RunInputs run_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                     const data::Dataframe& dataframe, const std::vector<std::string>& image_keys) {
  refuse_audio_extractor(config, extractor);
  const std::string columns = join(dataframe.columns());
  if (extractor.input() != models::ExtractorInput::tokens) {
    if (dataframe.is_text_dataframe()) {
      extractor_node(config).fail(extractor_name(config) + " reads images, but the dataframe " +
                                  dataframe.file() +
                                  " is a text dataframe (a 'text' column and no 'path'; columns: " + columns +
                                  "): use a text extractor such as hf_text_encoder, or an image dataframe");
    }
    return {};
  }
  if (!dataframe.has_column(data::columns::kText)) {
    extractor_node(config).fail(extractor_name(config) + " reads texts (tokens), but the dataframe " +
                                dataframe.file() + " has no 'text' column (columns: " + columns +
                                "): give it a text dataframe ('text' in place of 'path', "
                                "docs/data.md#text-dataframes) or use an image extractor");
  }
  return text_inputs(config, extractor, dataframe.file(), image_keys);
}

RunInputs text_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                      const std::string& texts, const std::vector<std::string>& image_keys) {
  refuse_audio_extractor(config, extractor);
  if (extractor.input() != models::ExtractorInput::tokens)
    extractor_node(config).fail(extractor_name(config) + " reads images, not texts");
  refuse_image_settings(config, image_keys);
  const std::optional<models::TextInputSpec> spec = models::text_input_of(extractor);
  if (!spec) {
    extractor_node(config).fail(
        extractor_name(config) +
        " reads texts (tokens) but does not say with which tokenizer: it implements no "
        "oml::models::TextInputSource (oml/models/text_input.h), so the pipelines "
        "cannot feed it");
  }
  std::error_code ec;
  OML_CHECK(fs::is_regular_file(spec->tokenizer_file, ec), DataError, spec->tokenizer_file.string(),
            " does not exist: ", extractor_name(config),
            " tokenizes with the tokenizer.json of its model folder (Hugging Face folders ship it beside "
            "config.json; transformers' tokenizer.save_pretrained(folder) writes it)");
  RunInputs inputs;
  inputs.kind = RowInput::texts;
  inputs.text = spec;
  inputs.tokenizer =
      data::prepare_tokenizer(text::Tokenizer::from_file(spec->tokenizer_file.string()), spec->max_tokens);
  log::info("texts of " + texts + ": tokenized by " + spec->tokenizer_file.string() + ", truncated to " +
            std::to_string(inputs.tokenizer->truncation()->max_length) +
            " tokens, each batch padded to its longest text");
  return inputs;
}

data::TextDatasetOptions text_dataset_options(const RunInputs& inputs, const std::string& source) {
  OML_ASSERT(inputs.text && inputs.tokenizer, "text inputs without their tokenizer");
  data::TextDatasetOptions options;
  options.max_tokens = inputs.text->max_tokens;
  options.pad_id = inputs.text->pad_id;
  options.token_types = inputs.text->token_types;
  options.source = source;
  return options;
}

std::shared_ptr<data::Dataset> run_dataset(const config::RunConfig& config, const RunInputs& inputs,
                                           const data::Dataframe& dataframe, const data::DataSplit& split,
                                           const std::optional<ParsedComponents::Transform>& transform_slot,
                                           const std::string& transform_key) {
  if (inputs.kind == RowInput::images) {
    return std::make_shared<data::ImageDataset>(split, build_transform(config, transform_slot, transform_key),
                                                image_limits(config));
  }
  return std::make_shared<data::TextDataset>(split, inputs.tokenizer,
                                             text_dataset_options(inputs, dataframe.file()));
}

void require_image_extractor(const config::RunConfig& config, const models::Extractor& extractor,
                             const std::string& command) {
  if (extractor.input() == models::ExtractorInput::images) return;
  refuse_audio_extractor(config, extractor);
  extractor_node(config).fail(extractor_name(config) + " reads texts, and " + command +
                              " feeds images only (docs/data.md#text-dataframes)");
}

}  // namespace oml::pipelines
