#include "support/text_fixtures.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "oml/models/text_config.h"
#include "oml/models/text_encoder.h"
#include "support/support.h"

namespace oml::test {

namespace {
using Json = nlohmann::ordered_json;

const char* const kSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
}  // namespace

const std::vector<std::string>& tiny_text_words() {
  static const std::vector<std::string> words = {
      "apple",  "river",  "engine", "violin", "desert", "castle", "rocket", "garden", "forest",
      "planet", "bridge", "island", "the",    "a",      "is",     "very",   "and",    "with",
      "near",   "far",    "red",    "blue",   "green",  "small",  "large",  "old",    "new",
      "quiet",  "fast",   "slow",   "bright", "dark",   "##s"};
  return words;
}

int64_t tiny_vocab_size() { return 4 + static_cast<int64_t>(tiny_text_words().size()); }

std::string tiny_tokenizer_json(const TinyTokenizerOptions& options) {
  Json vocab = Json::object();
  int64_t id = 0;
  for (const char* token : kSpecialTokens) vocab[token] = id++;
  for (const std::string& word : tiny_text_words()) vocab[word] = id++;
  Json added = Json::array();
  for (int64_t i = 0; i < 4; ++i) {
    added.push_back(Json{{"id", i},
                         {"content", kSpecialTokens[i]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
  }
  const Json bert_normalizer{{"type", "BertNormalizer"},
                             {"clean_text", true},
                             {"handle_chinese_chars", true},
                             {"strip_accents", nullptr},
                             {"lowercase", true}};
  Json normalizer = bert_normalizer;
  if (!options.removed.empty()) {
    const Json replace{{"type", "Replace"}, {"pattern", Json{{"String", options.removed}}}, {"content", ""}};
    normalizer = Json{{"type", "Sequence"}, {"normalizers", Json::array({replace, bert_normalizer})}};
  }
  Json doc = Json::object();
  doc["version"] = "1.0";
  doc["truncation"] = nullptr;
  if (options.truncation) {
    doc["truncation"] = Json{{"direction", "Right"},
                             {"max_length", *options.truncation},
                             {"strategy", "LongestFirst"},
                             {"stride", 0}};
  }
  doc["padding"] = nullptr;
  if (options.fixed_padding) {
    doc["padding"] = Json{{"strategy", Json{{"Fixed", *options.fixed_padding}}},
                          {"direction", "Right"},
                          {"pad_id", kTinyPad},
                          {"pad_type_id", 0},
                          {"pad_token", "[PAD]"}};
  }
  doc["added_tokens"] = added;
  doc["normalizer"] = normalizer;
  doc["pre_tokenizer"] = Json{{"type", "BertPreTokenizer"}};
  doc["post_processor"] = nullptr;
  if (options.special_tokens) {
    doc["post_processor"] = Json{{"type", "BertProcessing"},
                                 {"sep", Json::array({"[SEP]", kTinySep})},
                                 {"cls", Json::array({"[CLS]", kTinyCls})}};
  }
  doc["decoder"] = nullptr;
  doc["model"] = Json{{"type", "WordPiece"},
                      {"unk_token", "[UNK]"},
                      {"continuing_subword_prefix", "##"},
                      {"max_input_chars_per_word", 100},
                      {"vocab", vocab}};
  return doc.dump(2) + "\n";
}

models::TextEncoderConfig tiny_text_config(int64_t max_position_embeddings) {
  models::TextEncoderConfig config;
  config.model_type = "bert";
  config.vocab_size = tiny_vocab_size();
  config.hidden_size = 16;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2;
  config.intermediate_size = 32;
  config.hidden_act = "gelu";
  config.max_position_embeddings = max_position_embeddings;
  config.type_vocab_size = 2;
  config.pad_token_id = kTinyPad;
  // Weights drawn wider than BERT's 0.02, so that a random model already tells texts apart.
  config.initializer_range = 0.2;
  return config;
}

void write_tiny_text_model(const std::filesystem::path& dir, int64_t max_position_embeddings, uint64_t seed,
                           const TinyTokenizerOptions& tokenizer) {
  torch::manual_seed(seed);
  const models::TextEncoder model(tiny_text_config(max_position_embeddings));
  model->save_pretrained(dir);
  write_file(dir / "tokenizer.json", tiny_tokenizer_json(tokenizer));
}

}  // namespace oml::test
