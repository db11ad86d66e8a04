#pragma once
// What a text extractor (Extractor::input() == tokens) tells the pipelines that tokenize for it:
// the tokenizer its ids come from, how many tokens a text may have, and which id the model reads
// as padding. The pipelines build a TextDataset from it (oml/data/text_dataset.h).
//
// hf_text_encoder implements it from its model folder: `model_dir/tokenizer.json`, where Hugging
// Face folders keep their tokenizer. A plugin's text extractor implements TextInputSource too, or
// the pipelines cannot feed it texts (a ConfigError naming it). Like OmlWeightsReader, it is a
// separate interface found by dynamic_cast, so that Extractor's own interface is unchanged.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace oml::models {

class Extractor;

struct TextInputSpec {
  /// The tokenizer.json its ids come from (oml/text/tokenizer.h).
  std::filesystem::path tokenizer_file;
  /// The most tokens per text, special tokens included: what the model's positions hold
  /// (BERT: max_position_embeddings; RoBERTa: that less pad_token_id + 1).
  int64_t max_tokens = 512;
  /// The id the model reads as padding (its pad_token_id; 0 when it has none).
  int64_t pad_id = 0;
  /// Whether it takes token type ids (packed [B, 3, L]); false: [B, 2, L] (DistilBERT).
  bool token_types = true;
  /// The files the model and its tokenizer are read from (hf_text_encoder: config.json,
  /// tokenizer.json and the weights file or shards): an index folder pins them by SHA-256, so
  /// that a query is embedded as its gallery was (docs/serving.md#texts). Empty: none to pin.
  std::vector<std::filesystem::path> model_files;
};

/// Implemented by text extractors alongside Extractor.
class TextInputSource {
 public:
  virtual ~TextInputSource() = default;
  /// What the pipelines need to tokenize for this extractor. UsageError when it cannot say (a
  /// model built in code rather than from a folder has no tokenizer file).
  virtual TextInputSpec text_input() const = 0;
};

/// The TextInputSpec of `extractor`, or of the extractor it wraps (extractor_with_mlp's backbone);
/// nullopt when neither is a TextInputSource.
std::optional<TextInputSpec> text_input_of(const Extractor& extractor);

}  // namespace oml::models
