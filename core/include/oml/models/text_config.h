#pragma once
// The `config.json` of a Hugging Face BERT-family model: the numbers a TextEncoder is built from,
// read as transformers 5.24 reads them (its config classes' defaults for absent keys) and written
// back so that transformers.AutoModel.from_pretrained builds the same model.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace oml::models {

/// How the encoder is laid out, by `model_type`:
/// - bert: BertModel (also MiniLM, E5, BGE and GTE-small/base/large, which are BERT configs);
/// - roberta: RobertaModel for `roberta`, `xlm-roberta` and `camembert` — BERT's layers with
///   position ids counted from pad_token_id + 1 over the non-padding tokens;
/// - distilbert: DistilBertModel — no token types, no pooler, its own names.
enum class TextFamily { bert, roberta, distilbert };

/// BERT's names for the fields (DistilBERT's own in brackets, as its config.json spells them).
struct TextEncoderConfig {
  std::string model_type = "bert";  ///< bert | roberta | xlm-roberta | camembert | distilbert
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;                  ///< [dim]
  int64_t num_hidden_layers = 12;             ///< [n_layers]
  int64_t num_attention_heads = 12;           ///< [n_heads]
  int64_t intermediate_size = 3072;           ///< [hidden_dim]
  std::string hidden_act = "gelu";            ///< [activation]; text_activation_names()
  double hidden_dropout_prob = 0.1;           ///< [dropout]
  double attention_probs_dropout_prob = 0.1;  ///< [attention_dropout]
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;              ///< 0 for DistilBERT (no token type embeddings)
  double layer_norm_eps = 1e-12;            ///< DistilBERT: always 1e-12
  std::optional<int64_t> pad_token_id = 0;  ///< null in some BERT configs; RoBERTa needs it
  double initializer_range = 0.02;          ///< std of the random initialisation
  bool sinusoidal_pos_embds = false;        ///< DistilBERT: initial position embeddings
  /// The config.json this was read from, verbatim ("" when built in code): the keys it has and
  /// this struct does not (id2label, bos_token_id, tokenizer_class, ...) are written back.
  std::string source_json;
};

/// transformers' defaults for `model_type` (its config class's field defaults). DataError when
/// the model type is not one of the supported ones (text_model_types()), saying why for the
/// known BERT-like ones that are not supported.
TextEncoderConfig default_text_config(const std::string& model_type);

TextFamily text_family(const TextEncoderConfig& config);
/// bert, roberta, xlm-roberta, camembert, distilbert.
const std::vector<std::string>& text_model_types();
/// The hidden_act values implemented (transformers' ACT2FN names): gelu, gelu_python, gelu_new,
/// gelu_fast, gelu_accurate, gelu_pytorch_tanh, gelu_python_tanh, quick_gelu, relu, silu, swish,
/// tanh.
const std::vector<std::string>& text_activation_names();
/// transformers' class for the model type ("BertModel", "XLMRobertaModel", ...).
std::string text_model_class(const TextEncoderConfig& config);
/// The attribute transformers' task models keep the encoder in (base_model_prefix): "bert",
/// "roberta" (also for XLM-R and CamemBERT) or "distilbert".
std::string text_base_prefix(const TextEncoderConfig& config);

/// DataError naming `source` and the field for values no model can be built from (sizes < 1,
/// hidden_size not a multiple of num_attention_heads, pad_token_id outside the vocabulary or
/// absent for RoBERTa, an unknown hidden_act, dropout outside [0, 1), ...).
void check_text_config(const TextEncoderConfig& config, const std::string& source);

/// Reads and checks a config.json. DataError naming the file and the key for: an unreadable file
/// or invalid JSON; an unsupported model_type; a value of the wrong type; what transformers would
/// run differently from a BERT encoder — a `position_embedding_type` other than "absolute",
/// `is_decoder` or `add_cross_attention` true, an `embedding_size` other than hidden_size,
/// `auto_map` naming an AutoModel (the repository's own code, e.g. Jina's ALiBi BERT).
TextEncoderConfig read_text_config(const std::filesystem::path& path);

/// The config.json text for `config`: source_json's keys, with every field above (under the
/// model type's own names), `architectures` = [text_model_class], `model_type` and
/// `dtype: float32` set, and a `torch_dtype` removed.
std::string text_config_json(const TextEncoderConfig& config);

}  // namespace oml::models
