#include "runtime/run_inputs.h"

#include <filesystem>
#include <sstream>
#include <system_error>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/text_dataset.h"
#include "oml/models/audio_input.h"
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

const char* reads(models::ExtractorInput input) {
  switch (input) {
    case models::ExtractorInput::tokens:
      return "texts";
    case models::ExtractorInput::audio:
      return "audio";
    case models::ExtractorInput::images:
      break;
  }
  return "images";
}

/// A ConfigError at each of `keys` the config sets: image settings a text or audio run would ignore.
void refuse_image_settings(const config::RunConfig& config, const models::Extractor& extractor,
                           const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    const config::Node node = config.source[key];
    const bool set = key == "log_images" ? config.log_images : !node.is_null();
    if (!set) continue;
    (node.defined() ? node : config.source)
        .fail("'" + key + "' is an image setting, and this run reads " + reads(extractor.input()) + " (" +
              extractor_name(config) +
              (extractor.input() == models::ExtractorInput::tokens
                   ? " takes tokens, made by its own tokenizer.json"
                   : " takes waveforms, cut as `audio:` says") +
              "): remove it");
  }
}

/// A ConfigError at `audio:` when the config sets it and the run reads no audio.
void refuse_audio_settings(const config::RunConfig& config, const models::Extractor& extractor) {
  const config::Node node = config.source["audio"];
  if (node.is_null()) return;
  node.fail("'audio' says how audio files become items, and this run reads " +
            std::string(reads(extractor.input())) + " (" + extractor_name(config) + "): remove it");
}

}  // namespace

std::string RunInputs::unit() const {
  switch (kind) {
    case RowInput::texts:
      return "text";
    case RowInput::audio:
      return "clip";
    case RowInput::images:
      break;
  }
  return "img";
}

RunInputs run_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                     const data::Dataframe& dataframe, const std::vector<std::string>& image_keys) {
  const std::string columns = join(dataframe.columns());
  if (extractor.input() != models::ExtractorInput::tokens) {
    if (dataframe.is_text_dataframe()) {
      extractor_node(config).fail(extractor_name(config) + " reads " + reads(extractor.input()) +
                                  ", but the dataframe " + dataframe.file() +
                                  " is a text dataframe (a 'text' column and no 'path'; columns: " + columns +
                                  "): use a text extractor such as hf_text_encoder, or a dataframe of paths");
    }
    if (extractor.input() == models::ExtractorInput::audio)
      return audio_inputs(config, extractor, dataframe.file(), image_keys);
    refuse_audio_settings(config, extractor);
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

RunInputs image_inputs(const config::RunConfig& config, const models::Extractor& extractor) {
  if (extractor.input() != models::ExtractorInput::images)
    extractor_node(config).fail(extractor_name(config) + " reads " + reads(extractor.input()) +
                                ", not images");
  refuse_audio_settings(config, extractor);
  return {};
}

RunInputs text_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                      const std::string& texts, const std::vector<std::string>& image_keys) {
  if (extractor.input() != models::ExtractorInput::tokens)
    extractor_node(config).fail(extractor_name(config) + " reads " + reads(extractor.input()) +
                                ", not texts");
  refuse_image_settings(config, extractor, image_keys);
  refuse_audio_settings(config, extractor);
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

RunInputs audio_inputs(const config::RunConfig& config, const models::Extractor& extractor,
                       const std::string& source, const std::vector<std::string>& image_keys) {
  if (extractor.input() != models::ExtractorInput::audio)
    extractor_node(config).fail(extractor_name(config) + " reads " + reads(extractor.input()) +
                                ", not audio");
  refuse_image_settings(config, extractor, image_keys);
  const std::optional<int64_t> rate = models::audio_sample_rate_of(extractor);
  if (!rate) {
    extractor_node(config).fail(extractor_name(config) +
                                " reads audio but does not say at which sample rate: it implements no "
                                "oml::models::AudioInputSource (oml/models/audio_input.h), so the pipelines "
                                "cannot check what they feed it");
  }
  const config::AudioOptions& audio = config.audio;
  if (audio.sample_rate != *rate) {
    const config::Node node = config.source["audio"]["sample_rate"];
    (node.defined() ? node : config.source)
        .fail(std::to_string(audio.sample_rate) + " Hz, but " + extractor_name(config) +
              " reads waveforms sampled at " + std::to_string(*rate) +
              " Hz (its front end is built for that rate): set audio.sample_rate: " + std::to_string(*rate) +
              " (every file is resampled to it)");
  }
  RunInputs inputs;
  inputs.kind = RowInput::audio;
  data::AudioDatasetOptions options;
  options.sample_rate = audio.sample_rate;
  options.max_num_seconds =
      audio.max_num_seconds > 0 ? std::optional<double>(audio.max_num_seconds) : std::nullopt;
  options.convert_to_mono = audio.convert_to_mono;
  inputs.audio = options;
  std::ostringstream message;
  message << "audio of " << source << ": resampled to " << audio.sample_rate << " Hz"
          << (audio.convert_to_mono ? ", downmixed to mono" : "");
  if (audio.max_num_seconds > 0) {
    message << ", cut or left-padded to " << audio.max_num_seconds << " s";
  } else {
    message << ", whole files";
  }
  log::info(message.str());
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

data::AudioDatasetOptions audio_dataset_options(const RunInputs& inputs, const std::string& source) {
  OML_ASSERT(inputs.audio, "audio inputs without their options");
  data::AudioDatasetOptions options = *inputs.audio;
  options.source = source;
  return options;
}

std::shared_ptr<data::Dataset> run_dataset(const config::RunConfig& config, const RunInputs& inputs,
                                           const data::Dataframe& dataframe, const data::DataSplit& split,
                                           const std::optional<ParsedComponents::Transform>& transform_slot,
                                           const std::string& transform_key) {
  switch (inputs.kind) {
    case RowInput::texts:
      return std::make_shared<data::TextDataset>(split, inputs.tokenizer,
                                                 text_dataset_options(inputs, dataframe.file()));
    case RowInput::audio:
      return std::make_shared<data::AudioDataset>(split, audio_dataset_options(inputs, dataframe.file()));
    case RowInput::images:
      break;
  }
  return std::make_shared<data::ImageDataset>(split, build_transform(config, transform_slot, transform_key),
                                              image_limits(config));
}

void require_image_extractor(const config::RunConfig& config, const models::Extractor& extractor,
                             const std::string& command) {
  if (extractor.input() == models::ExtractorInput::images) {
    refuse_audio_settings(config, extractor);
    return;
  }
  extractor_node(config).fail(extractor_name(config) + " reads " + reads(extractor.input()) + ", and " +
                              command + " feeds images only (docs/data.md)");
}

}  // namespace oml::pipelines
