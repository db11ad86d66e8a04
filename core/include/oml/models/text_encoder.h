#pragma once
// BERT-family text encoders as transformers 5.24 defines them (BertModel, RobertaModel,
// XLMRobertaModel, CamembertModel, DistilBertModel), loaded from and saved to Hugging Face model
// folders, pooled into one embedding per text as sentence-transformers and OML's HFWrapper do.
//
// Parameters sit at the module's top level under transformers' own names for the base model
// (`embeddings.word_embeddings.weight`, `encoder.layer.3.attention.self.query.bias`,
// `transformer.layer.0.ffn.lin1.weight`, `pooler.dense.weight`): the state dict of an oml-cpp
// checkpoint is what AutoModel saves, and OML's HFWrapper keeps the same network under `model.`.

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <filesystem>
#include <string>
#include <vector>

#include "oml/io/state_dict.h"
#include "oml/models/dense.h"
#include "oml/models/extractor.h"
#include "oml/models/text_config.h"
#include "oml/models/text_input.h"
#include "oml/models/token_batch.h"

namespace oml::models {

/// How token states become one embedding per text:
/// - cls: the first token's state (OML's HFWrapper; sentence-transformers' `cls`);
/// - mean: the mean over the tokens of the attention mask (sentence-transformers' `mean`);
/// - max: the per-channel max over those tokens (sentence-transformers' `max`);
/// - pooler: transformers' pooler_output, tanh(dense(first token)) — BERT / RoBERTa folders that
///   have the pooler's weights.
enum class TextPooling { cls, mean, max, pooler };

/// cls mean max pooler.
const std::vector<std::string>& text_pooling_names();
/// config::ArgumentError (key `pooling` of extractor 'hf_text_encoder') for an unknown name.
TextPooling text_pooling(const std::string& name);

/// `extractor: {name: hf_text_encoder, args: {model_dir: models/bge-small-en-v1.5, pooling: cls,
///                                             normalise_features: true}}`
struct TextEncoderOptions {
  std::string model_dir;            ///< a Hugging Face model folder (read_hf_text_folder)
  std::string pooling = "cls";      ///< text_pooling_names(); cls as OML's HFWrapper
  bool normalise_features = false;  ///< divide by the L2 norm as sentence-transformers' Normalize
  /// "" or a file loaded after the folder's weights, as load_weights() reads it (an oml-cpp or
  /// OML checkpoint of this model, a .safetensors file, another folder of the same shapes).
  std::string weights;
};

/// config::ArgumentError naming the first bad field (no model_dir, an unknown pooling); reads no file.
void check_options(const TextEncoderOptions& options);

/// One BERT / RoBERTa layer: post-norm self-attention, then the feed-forward block, with
/// transformers' names (attention.self.{query,key,value}, attention.output.{dense,LayerNorm},
/// intermediate.dense, output.{dense,LayerNorm}).
class BertLayerImpl : public torch::nn::Module {
 public:
  explicit BertLayerImpl(const TextEncoderConfig& config);
  /// `x` [B, N, hidden]; `key_mask` [B, N] (nonzero: token) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_mask);

 private:
  int64_t num_heads_;
  double hidden_dropout_, attention_dropout_;
  std::string hidden_act_;
  Dense query_{nullptr}, key_{nullptr}, value_{nullptr}, attention_dense_{nullptr};
  Dense intermediate_{nullptr}, output_dense_{nullptr};
  torch::nn::LayerNorm attention_norm_{nullptr}, output_norm_{nullptr};
};
TORCH_MODULE(BertLayer);

/// One DistilBERT layer (TransformerBlock): attention.{q_lin,k_lin,v_lin,out_lin}, sa_layer_norm,
/// ffn.{lin1,lin2}, output_layer_norm.
class DistilBertLayerImpl : public torch::nn::Module {
 public:
  explicit DistilBertLayerImpl(const TextEncoderConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_mask);

 private:
  int64_t num_heads_;
  double hidden_dropout_, attention_dropout_;
  std::string hidden_act_;
  Dense q_lin_{nullptr}, k_lin_{nullptr}, v_lin_{nullptr}, out_lin_{nullptr};
  Dense lin1_{nullptr}, lin2_{nullptr};
  torch::nn::LayerNorm sa_norm_{nullptr}, output_norm_{nullptr};
};
TORCH_MODULE(DistilBertLayer);

/// The encoder with pooling, as an extractor of packed tokens (Extractor::input() == tokens).
/// Dropout (hidden_dropout_prob on the embeddings and each sublayer's output,
/// attention_probs_dropout_prob on the attention weights) acts in train() mode, as transformers'.
/// Parameters stay float32; under autocast (bf16) the layers compute in bf16 as transformers'
/// do under torch.autocast. Built from a folder, it tells the pipelines to tokenize with the
/// folder's tokenizer.json (TextInputSource).
class TextEncoderImpl : public Extractor, public OmlWeightsReader, public TextInputSource {
 public:
  /// Random weights, initialised as transformers does (normal(0, initializer_range) for linear
  /// and embedding weights with the padding row zero, zero biases, LayerNorms 1 and 0;
  /// DistilBERT's sinusoidal position table when sinusoidal_pos_embds). Pooling `pooler` adds the
  /// pooler (not for DistilBERT: DataError). DataError when `config` fails check_text_config.
  explicit TextEncoderImpl(TextEncoderConfig config, TextPooling pooling = TextPooling::cls,
                           bool normalise_features = false);
  /// The model of the folder `options.model_dir` with its weights (read_hf_text_folder), then
  /// `options.weights` when given.
  explicit TextEncoderImpl(const TextEncoderOptions& options);

  /// Packed tokens [B, 2 | 3, L] (oml/models/token_batch.h) -> embeddings [B, hidden_size].
  torch::Tensor forward(torch::Tensor tokens) override;
  /// The pooled (and, as configured, normalised) embeddings of a batch.
  torch::Tensor embed(const TokenBatch& batch);
  /// transformers' last_hidden_state [B, L, hidden_size]. DataError naming the model for: an id
  /// outside the vocabulary, a token type outside type_vocab_size (any nonzero one for
  /// DistilBERT), more positions than max_position_embeddings holds.
  torch::Tensor hidden_states(const TokenBatch& batch);

  int64_t feat_dim() const override { return config_.hidden_size; }
  ExtractorInput input() const override { return ExtractorInput::tokens; }
  /// `model_dir`/tokenizer.json, max_tokens(), the config's pad_token_id (0 without one), token
  /// types unless DistilBERT. UsageError for a model built from a TextEncoderConfig (no folder).
  TextInputSpec text_input() const override;
  /// The most tokens per text its positions hold: max_position_embeddings, less pad_token_id + 1
  /// for RoBERTa (whose positions start after the padding id).
  int64_t max_tokens() const;
  std::string oml_module_attribute() const override { return "model"; }  // HFWrapper.model

  /// Loads `weights` strictly: a Hugging Face folder (its weights file; its config.json must
  /// describe the same shapes), a .safetensors file, or a torch.save file (pytorch_model.bin, an
  /// oml-cpp checkpoint, OML's HFWrapper state dict or Lightning checkpoint). The encoder is found
  /// by the prefix in front of `embeddings.word_embeddings.weight` (none, `bert.`, `roberta.`,
  /// `distilbert.`, `model.`, ...); what lies outside that prefix (a task model's head) is
  /// dropped, as AutoModel drops it. Inside it, `embeddings.position_ids` and
  /// `embeddings.token_type_ids` (buffers older transformers saved) and, unless pooling is
  /// `pooler`, `pooler.*` are ignored; LayerNorm's legacy `gamma` / `beta` are read as `weight` /
  /// `bias`. Anything else missing, unexpected or of another shape is a DataError naming it;
  /// float16 and bfloat16 tensors are converted to float32.
  void load_weights(const std::string& weights) override;
  /// The same for tensors already read; `source` names them in errors.
  void load_hf_state_dict(const io::StateDict& weights, const std::string& source);

  /// Writes `dir`/config.json (text_config_json) and `dir`/model.safetensors (float32, metadata
  /// {"format": "pt"}), each atomically; transformers.AutoModel.from_pretrained(dir) builds the
  /// same model (without a pooler in the file, transformers initialises its own, which
  /// last_hidden_state does not use).
  void save_pretrained(const std::filesystem::path& dir) const;

  const TextEncoderConfig& config() const { return config_; }
  TextPooling pooling() const { return pooling_; }

 private:
  torch::Tensor embeddings(const TokenBatch& batch);
  torch::Tensor pool(const torch::Tensor& hidden, const torch::Tensor& mask);
  std::string who() const;

  TextEncoderConfig config_;
  std::filesystem::path model_dir_;  ///< the folder it was read from; empty when built from a config
  TextFamily family_;
  TextPooling pooling_;
  bool normalise_features_;
  torch::nn::Embedding word_embeddings_{nullptr}, position_embeddings_{nullptr},
      token_type_embeddings_{nullptr};
  torch::nn::LayerNorm embedding_norm_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::Linear pooler_{nullptr};
};
TORCH_MODULE(TextEncoder);

/// The weights of a Hugging Face model folder, found as transformers looks for them:
/// model.safetensors, else the shards of model.safetensors.index.json, else pytorch_model.bin,
/// else the shards of pytorch_model.bin.index.json. DataError naming the folder when there is
/// none (listing what it holds), or naming the file when one is malformed.
io::StateDict read_hf_weights(const std::filesystem::path& dir);

/// The files read_hf_weights reads in `dir`: the weights file, or a shard index followed by its
/// shards; empty when the folder has none. DataError when a shard index is malformed.
std::vector<std::filesystem::path> hf_weight_files(const std::filesystem::path& dir);

/// The config.json of a Hugging Face model folder (read_text_config). DataError when the folder
/// or the file does not exist.
TextEncoderConfig read_hf_text_folder(const std::filesystem::path& dir);

}  // namespace oml::models
