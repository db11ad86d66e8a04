#pragma once
// A tiny BERT-shaped text model made on the spot, with nothing downloaded and no Python: a
// WordPiece tokenizer.json over a small English vocabulary (BERT's normalizer and pre-tokenizer,
// [CLS] ... [SEP] added by BertProcessing, as HF `tokenizers` writes such files) and an
// hf_text_encoder folder of random weights (config.json + model.safetensors written by
// TextEncoderImpl::save_pretrained), for the text dataset and text pipeline tests.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace oml::models {
struct TextEncoderConfig;
}  // namespace oml::models

namespace oml::test {

/// Ids of the special tokens of the tiny vocabulary.
inline constexpr int64_t kTinyPad = 0, kTinyUnk = 1, kTinyCls = 2, kTinySep = 3;

/// The tiny vocabulary's words, ids 4, 5, ... in this order (after [PAD] [UNK] [CLS] [SEP]);
/// lower-case words plus the suffix "##s".
const std::vector<std::string>& tiny_text_words();
/// 4 + tiny_text_words().size().
int64_t tiny_vocab_size();

struct TinyTokenizerOptions {
  std::optional<std::size_t> truncation;     ///< the file's truncation max_length (none: null)
  std::optional<std::size_t> fixed_padding;  ///< a padding section {"Fixed": n} (none: null)
  bool special_tokens = true;                ///< BertProcessing as post-processor (false: none)
  /// A Replace normalizer of this string by "" before BERT's (to make texts that vanish).
  std::string removed;
};

/// The tokenizer.json text of the tiny vocabulary.
std::string tiny_tokenizer_json(const TinyTokenizerOptions& options = {});

/// The config of a 2-layer BERT over the tiny vocabulary (hidden 16, 2 heads, pad id 0).
models::TextEncoderConfig tiny_text_config(int64_t max_position_embeddings = 32);

/// Writes `dir`/config.json and model.safetensors (tiny_text_config's model, random weights drawn
/// after torch::manual_seed(seed)) and `dir`/tokenizer.json (tiny_tokenizer_json(tokenizer)).
void write_tiny_text_model(const std::filesystem::path& dir, int64_t max_position_embeddings = 32,
                           uint64_t seed = 7, const TinyTokenizerOptions& tokenizer = {});

}  // namespace oml::test
