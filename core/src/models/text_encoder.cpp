#include "oml/models/text_encoder.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>

#include "attention.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"
#include "oml/io/atomic_file.h"
#include "oml/io/safetensors.h"
#include "oml/io/torch_file.h"

namespace oml::models {
namespace {

namespace nn = torch::nn;
namespace fs = std::filesystem;

constexpr const char* kComponent = "extractor 'hf_text_encoder'";
// The key every BERT-family state dict has once, whatever prefix the saving class put in front.
constexpr const char* kEncoderTrialKey = "embeddings.word_embeddings.weight";

// transformers' ACT2FN, each written as transformers computes it (the tanh approximations
// differ in their last bits, which the parity tests see).
torch::Tensor activate(const torch::Tensor& x, const std::string& name) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;  // math.sqrt(2.0 / math.pi)
  if (name == "gelu" || name == "gelu_python") return torch::gelu(x);
  if (name == "gelu_pytorch_tanh") return torch::gelu(x, "tanh");
  if (name == "gelu_new" || name == "gelu_accurate" || name == "gelu_python_tanh") {
    return 0.5 * x * (1.0 + torch::tanh(kSqrt2OverPi * (x + 0.044715 * x.pow(3.0))));
  }
  if (name == "gelu_fast") return 0.5 * x * (1.0 + torch::tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)));
  if (name == "quick_gelu") return x * torch::sigmoid(1.702 * x);
  if (name == "relu") return torch::relu(x);
  if (name == "silu" || name == "swish") return torch::silu(x);
  if (name == "tanh") return torch::tanh(x);
  throw InternalError("hidden_act '" + name + "' passed check_text_config but has no implementation");
}

nn::LayerNorm layer_norm(const TextEncoderConfig& c) {
  return nn::LayerNorm(nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps));
}

nn::Embedding embedding(int64_t rows, int64_t dim, std::optional<int64_t> padding_idx) {
  auto options = nn::EmbeddingOptions(rows, dim);
  if (padding_idx) options.padding_idx(*padding_idx);
  return nn::Embedding(options);
}

// DistilBERT's create_sinusoidal_embeddings: sin on even channels, cos on odd ones, of
// pos / 10000^(2 * (j // 2) / dim), computed in double as numpy does.
torch::Tensor sinusoidal_table(int64_t positions, int64_t dim) {
  auto table = torch::empty({positions, dim}, torch::kDouble);
  auto t = table.accessor<double, 2>();
  for (int64_t pos = 0; pos < positions; ++pos) {
    for (int64_t j = 0; j < dim; ++j) {
      const double angle =
          static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / dim);
      t[pos][j] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  return table.to(torch::kFloat);
}

// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

bool is_torch_zip(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

io::StateDict read_weights_file(const fs::path& path) {
  if (is_torch_zip(path)) return io::find_state_dict(io::read_torch_file(path), path.string());
  return io::read_safetensors(path).tensors;
}

// A sharded checkpoint's index: each shard file (checked to lie beside the index) with the tensors
// its weight_map places in it.
std::map<fs::path, std::set<std::string>> read_shard_map(const fs::path& index_path) {
  const std::string source = index_path.string();
  std::ifstream in(index_path);
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(source + ": not valid JSON (" + e.what() + ")");
  }
  OML_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), DataError,
            source, ": expected an object with a 'weight_map' of tensor name -> file");
  std::map<fs::path, std::set<std::string>> names_by_file;
  for (const auto& [name, value] : index["weight_map"].items()) {
    OML_CHECK(value.is_string(), DataError, source, ": weight_map['", name, "'] must be a file name, got ",
              value.dump());
    const std::string file = value.get<std::string>();
    // Shards lie next to the index (transformers writes bare file names); a path elsewhere is
    // not read.
    OML_CHECK(!file.empty() && fs::path(file).filename() == fs::path(file) && file != "." && file != "..",
              DataError, source, ": the shard '", file, "' is not a file name in the index's folder");
    const auto shard_path = index_path.parent_path() / file;
    OML_CHECK(fs::is_regular_file(shard_path), DataError, source, ": the shard ", file,
              " it names is not in ", index_path.parent_path().string());
    names_by_file[shard_path].insert(name);
  }
  return names_by_file;
}

// A sharded checkpoint: the index's weight_map names each tensor's file.
io::StateDict read_shards(const fs::path& index_path) {
  io::StateDict out;
  for (const auto& [shard_path, names] : read_shard_map(index_path)) {
    auto shard = read_weights_file(shard_path);
    for (const auto& name : names) {
      const auto found = shard.find(name);
      OML_CHECK(found != shard.end(), DataError, shard_path.string(), ": has no tensor '", name, "', which ",
                index_path.filename().string(), " places in it");
      out.emplace(name, found->second);
    }
  }
  return out;
}

// The weights file transformers would read in `dir` (its order of preference), or empty.
fs::path hf_weights_entry(const fs::path& dir) {
  for (const char* name : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                           "pytorch_model.bin.index.json"}) {
    if (fs::is_regular_file(dir / name)) return dir / name;
  }
  return {};
}

}  // namespace

const std::vector<std::string>& text_pooling_names() {
  static const std::vector<std::string> names = {"cls", "mean", "max", "pooler"};
  return names;
}

TextPooling text_pooling(const std::string& name) {
  if (name == "cls") return TextPooling::cls;
  if (name == "mean") return TextPooling::mean;
  if (name == "max") return TextPooling::max;
  if (name == "pooler") return TextPooling::pooler;
  config::fail_argument(kComponent, "pooling", "unknown pooling '", name, "'",
                        did_you_mean(name, text_pooling_names()), "; expected one of ",
                        join(text_pooling_names()));
}

void check_options(const TextEncoderOptions& o) {
  config::check_argument(!o.model_dir.empty(), kComponent, "model_dir",
                         "a Hugging Face model folder is required (config.json + model.safetensors or "
                         "pytorch_model.bin)");
  (void)text_pooling(o.pooling);
}

// ---- layers -------------------------------------------------------------------------------------

BertLayerImpl::BertLayerImpl(const TextEncoderConfig& c)
    : num_heads_(c.num_attention_heads),
      hidden_dropout_(c.hidden_dropout_prob),
      attention_dropout_(c.attention_probs_dropout_prob),
      hidden_act_(c.hidden_act) {
  const int64_t d = c.hidden_size;
  auto attention = register_module("attention", std::make_shared<nn::Module>("BertAttention"));
  auto self = attention->register_module("self", std::make_shared<nn::Module>("BertSelfAttention"));
  query_ = self->register_module("query", Dense(d, d));
  key_ = self->register_module("key", Dense(d, d));
  value_ = self->register_module("value", Dense(d, d));
  auto attention_output =
      attention->register_module("output", std::make_shared<nn::Module>("BertSelfOutput"));
  attention_dense_ = attention_output->register_module("dense", Dense(d, d));
  attention_norm_ = attention_output->register_module("LayerNorm", layer_norm(c));
  auto intermediate = register_module("intermediate", std::make_shared<nn::Module>("BertIntermediate"));
  intermediate_ = intermediate->register_module("dense", Dense(d, c.intermediate_size));
  auto output = register_module("output", std::make_shared<nn::Module>("BertOutput"));
  output_dense_ = output->register_module("dense", Dense(c.intermediate_size, d));
  output_norm_ = output->register_module("LayerNorm", layer_norm(c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& key_mask) {
  const bool training = is_training();
  const auto context = detail::masked_attention(query_(x), key_(x), value_(x), key_mask, num_heads_,
                                                training ? attention_dropout_ : 0.0);
  const auto attended =
      attention_norm_(torch::dropout(attention_dense_(context), hidden_dropout_, training) + x);
  const auto inner = activate(intermediate_(attended), hidden_act_);
  return output_norm_(torch::dropout(output_dense_(inner), hidden_dropout_, training) + attended);
}

DistilBertLayerImpl::DistilBertLayerImpl(const TextEncoderConfig& c)
    : num_heads_(c.num_attention_heads),
      hidden_dropout_(c.hidden_dropout_prob),
      attention_dropout_(c.attention_probs_dropout_prob),
      hidden_act_(c.hidden_act) {
  const int64_t d = c.hidden_size;
  auto attention = register_module("attention", std::make_shared<nn::Module>("DistilBertSelfAttention"));
  q_lin_ = attention->register_module("q_lin", Dense(d, d));
  k_lin_ = attention->register_module("k_lin", Dense(d, d));
  v_lin_ = attention->register_module("v_lin", Dense(d, d));
  out_lin_ = attention->register_module("out_lin", Dense(d, d));
  sa_norm_ = register_module("sa_layer_norm", layer_norm(c));
  auto ffn = register_module("ffn", std::make_shared<nn::Module>("FFN"));
  lin1_ = ffn->register_module("lin1", Dense(d, c.intermediate_size));
  lin2_ = ffn->register_module("lin2", Dense(c.intermediate_size, d));
  output_norm_ = register_module("output_layer_norm", layer_norm(c));
}

torch::Tensor DistilBertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& key_mask) {
  const bool training = is_training();
  const auto context = detail::masked_attention(q_lin_(x), k_lin_(x), v_lin_(x), key_mask, num_heads_,
                                                training ? attention_dropout_ : 0.0);
  const auto attended = sa_norm_(out_lin_(context) + x);
  const auto ffn = torch::dropout(lin2_(activate(lin1_(attended), hidden_act_)), hidden_dropout_, training);
  return output_norm_(ffn + attended);
}

// ---- the encoder --------------------------------------------------------------------------------

TextEncoderImpl::TextEncoderImpl(TextEncoderConfig config, TextPooling pooling, bool normalise_features)
    : config_(std::move(config)), pooling_(pooling), normalise_features_(normalise_features) {
  check_text_config(config_, "text encoder " + config_.model_type);
  family_ = text_family(config_);
  if (pooling_ == TextPooling::pooler && family_ == TextFamily::distilbert) {
    config::fail_fit(kComponent, "pooling", "DistilBERT has no pooler (use cls, mean or max)");
  }
  const auto& c = config_;
  const int64_t d = c.hidden_size;
  auto embeddings = register_module("embeddings", std::make_shared<nn::Module>("Embeddings"));
  word_embeddings_ =
      embeddings->register_module("word_embeddings", embedding(c.vocab_size, d, c.pad_token_id));
  // RoBERTa's position table keeps a (never used) row for the padding token's position.
  position_embeddings_ = embeddings->register_module(
      "position_embeddings", embedding(c.max_position_embeddings, d,
                                       family_ == TextFamily::roberta ? c.pad_token_id : std::nullopt));
  if (family_ != TextFamily::distilbert) {
    token_type_embeddings_ =
        embeddings->register_module("token_type_embeddings", embedding(c.type_vocab_size, d, std::nullopt));
  }
  embedding_norm_ = embeddings->register_module("LayerNorm", layer_norm(c));
  const bool distilbert = family_ == TextFamily::distilbert;
  auto encoder =
      register_module(distilbert ? "transformer" : "encoder", std::make_shared<nn::Module>("Encoder"));
  layers_ = encoder->register_module("layer", nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (distilbert) {
      layers_->push_back(DistilBertLayer(c));
    } else {
      layers_->push_back(BertLayer(c));
    }
  }
  if (pooling_ == TextPooling::pooler) {
    auto pooler = register_module("pooler", std::make_shared<nn::Module>("Pooler"));
    pooler_ = pooler->register_module("dense", nn::Linear(d, d));
  }

  // transformers' _init_weights (std 0.02 when initializer_range is 0, as there).
  torch::NoGradGuard no_grad;
  const double std = c.initializer_range > 0 ? c.initializer_range : 0.02;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<nn::Linear>()) {
      linear->weight.normal_(0.0, std);
      linear->bias.zero_();
    } else if (auto* table = module->as<nn::Embedding>()) {
      table->weight.normal_(0.0, std);
      if (const auto pad = table->options.padding_idx()) table->weight[*pad].zero_();
    } else if (auto* norm = module->as<nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
  if (distilbert && c.sinusoidal_pos_embds) {
    position_embeddings_->weight.copy_(sinusoidal_table(c.max_position_embeddings, d));
  }
}

TextEncoderImpl::TextEncoderImpl(const TextEncoderOptions& options)
    : TextEncoderImpl(read_hf_text_folder(options.model_dir), text_pooling(options.pooling),
                      options.normalise_features) {
  model_dir_ = options.model_dir;
  load_hf_state_dict(read_hf_weights(options.model_dir), options.model_dir);
  if (!options.weights.empty()) load_weights(options.weights);
}

std::string TextEncoderImpl::who() const { return "text encoder (" + config_.model_type + ")"; }

int64_t TextEncoderImpl::max_tokens() const {
  if (family_ == TextFamily::roberta) return config_.max_position_embeddings - *config_.pad_token_id - 1;
  return config_.max_position_embeddings;
}

TextInputSpec TextEncoderImpl::text_input() const {
  OML_CHECK(!model_dir_.empty(), UsageError, who(),
            " was built from a config, not read from a model folder: it has no tokenizer.json to name");
  TextInputSpec spec;
  spec.tokenizer_file = model_dir_ / "tokenizer.json";
  spec.max_tokens = max_tokens();
  spec.pad_id = config_.pad_token_id.value_or(0);
  spec.token_types = family_ != TextFamily::distilbert;
  spec.model_files = {model_dir_ / "config.json", spec.tokenizer_file};
  for (fs::path& file : hf_weight_files(model_dir_)) spec.model_files.push_back(std::move(file));
  return spec;
}

torch::Tensor TextEncoderImpl::embeddings(const TokenBatch& batch) {
  const auto& ids = batch.input_ids;
  const int64_t length = ids.size(1);
  torch::Tensor positions;
  if (family_ == TextFamily::roberta) {
    // transformers' create_position_ids_from_input_ids: non-padding tokens count from pad + 1,
    // padding tokens get the padding position.
    const int64_t pad = *config_.pad_token_id;
    const auto not_pad = ids.ne(pad).to(torch::kInt);
    positions = (torch::cumsum(not_pad, 1).to(torch::kInt) * not_pad).to(torch::kLong) + pad;
    const int64_t last = positions.max().item<int64_t>();
    OML_CHECK(last < config_.max_position_embeddings, DataError, who(), ": a text of ", last - pad,
              " tokens needs position ", last, ", the model has ", config_.max_position_embeddings,
              " (max_position_embeddings; pad_token_id ", pad, " + 1 is the first): truncate to at most ",
              config_.max_position_embeddings - pad - 1, " tokens");
  } else {
    OML_CHECK(length <= config_.max_position_embeddings, DataError, who(), ": texts of ", length,
              " tokens, the model has ", config_.max_position_embeddings,
              " positions (max_position_embeddings): truncate them");
    positions = torch::arange(length, ids.options()).unsqueeze(0);
  }
  auto x = word_embeddings_(ids);
  if (token_type_embeddings_) {
    x = x + token_type_embeddings_(batch.token_type_ids.defined() ? batch.token_type_ids
                                                                  : torch::zeros_like(ids));
  }
  x = x + position_embeddings_(positions);
  return torch::dropout(embedding_norm_(x), config_.hidden_dropout_prob, is_training());
}

torch::Tensor TextEncoderImpl::hidden_states(const TokenBatch& batch) {
  check_token_batch(batch, who());
  const int64_t low = batch.input_ids.min().item<int64_t>(), high = batch.input_ids.max().item<int64_t>();
  OML_CHECK(low >= 0 && high < config_.vocab_size, DataError, who(), ": token id ", low < 0 ? low : high,
            " is outside the vocabulary [0, ", config_.vocab_size, ") (is the tokenizer the model's own?)");
  if (batch.token_type_ids.defined()) {
    const int64_t types = family_ == TextFamily::distilbert ? 1 : config_.type_vocab_size;
    const int64_t lowest = batch.token_type_ids.min().item<int64_t>();
    const int64_t highest = batch.token_type_ids.max().item<int64_t>();
    OML_CHECK(lowest >= 0 && highest < types, DataError, who(), ": token type ",
              lowest < 0 ? lowest : highest,
              family_ == TextFamily::distilbert
                  ? std::string(", but DistilBERT has no token types (give ids and mask only)")
                  : ", but the model has type_vocab_size " + std::to_string(types));
  }
  // No mask when nothing is padded (as transformers, which then lets SDPA skip it).
  const auto key_mask =
      batch.attention_mask.eq(1).all().item<bool>() ? torch::Tensor() : batch.attention_mask;
  auto x = embeddings(batch);
  for (const auto& layer : *layers_) {
    if (family_ == TextFamily::distilbert) {
      x = layer->as<DistilBertLayer>()->forward(x, key_mask);
    } else {
      x = layer->as<BertLayer>()->forward(x, key_mask);
    }
  }
  return x;
}

torch::Tensor TextEncoderImpl::pool(const torch::Tensor& hidden, const torch::Tensor& mask) {
  switch (pooling_) {
    case TextPooling::cls:
      return hidden.select(1, 0);
    case TextPooling::mean: {
      // sentence-transformers: masked sum over the count of tokens (clamped at 1e-9).
      const auto weights = mask.unsqueeze(-1).to(hidden.scalar_type());
      return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1e-9);
    }
    case TextPooling::max:
      return std::get<0>(hidden.masked_fill(mask.unsqueeze(-1).eq(0), -1e9).max(1));
    case TextPooling::pooler:
      return torch::tanh(pooler_(hidden.select(1, 0)));
  }
  throw InternalError("text encoder: unknown pooling");
}

torch::Tensor TextEncoderImpl::embed(const TokenBatch& batch) {
  auto out = pool(hidden_states(batch), batch.attention_mask);
  if (normalise_features_)
    out = nn::functional::normalize(out, nn::functional::NormalizeFuncOptions().p(2).dim(1));
  return out;
}

torch::Tensor TextEncoderImpl::forward(torch::Tensor tokens) { return embed(unpack_tokens(tokens, who())); }

// ---- weights ------------------------------------------------------------------------------------

void TextEncoderImpl::load_hf_state_dict(const io::StateDict& weights, const std::string& source) {
  const auto encoder = io::select_backbone(weights, kEncoderTrialKey, source);
  if (encoder.size() < weights.size()) {
    log::debug(source + ": " + std::to_string(weights.size() - encoder.size()) +
               " tensors outside the encoder (a task model's head) are not used");
  }
  io::StateDict kept;
  for (const auto& [name, tensor] : encoder) {
    // Buffers older transformers saved; the pooler when it is not what pools.
    if (name == "embeddings.position_ids" || name == "embeddings.token_type_ids") continue;
    if (pooling_ != TextPooling::pooler && starts_with(name, "pooler.")) continue;
    // Checkpoints converted from TensorFlow (transformers renames these on loading too).
    kept.emplace(
        replaced(replaced(name, "LayerNorm.gamma", "LayerNorm.weight"), "LayerNorm.beta", "LayerNorm.bias"),
        tensor);
  }
  for (const auto& [name, tensor] : kept) {
    const auto type = tensor.scalar_type();
    OML_CHECK(
        type == torch::kFloat || type == torch::kHalf || type == torch::kBFloat16 || type == torch::kDouble,
        DataError, source, ": tensor '", name, "' is ", type, ", expected float32, float16 or bfloat16");
  }
  io::load_state_dict(*this, kept, source);
}

void TextEncoderImpl::load_weights(const std::string& weights) {
  const fs::path path(weights);
  OML_CHECK(fs::exists(path), DataError, weights, ": no such file or folder (text encoder weights)");
  if (fs::is_directory(path)) {
    const auto folder = read_hf_text_folder(path);
    OML_CHECK(text_family(folder) == family_, DataError, weights, ": a ", folder.model_type,
              " model's folder, the text encoder is ", config_.model_type);
    load_hf_state_dict(read_hf_weights(path), weights);
  } else {
    load_hf_state_dict(read_weights_file(path), weights);
  }
}

void TextEncoderImpl::save_pretrained(const fs::path& dir) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  OML_CHECK(!ec, RuntimeError, dir.string(), ": cannot create the folder: ", ec.message());
  io::StateDict tensors;
  for (const auto& [name, tensor] : io::state_dict(*this)) tensors.emplace(name, tensor.to(torch::kFloat));
  io::write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  io::write_file_atomic(dir / "config.json", text_config_json(config_));
}

// ---- folders ------------------------------------------------------------------------------------

std::vector<fs::path> hf_weight_files(const fs::path& dir) {
  const fs::path entry = hf_weights_entry(dir);
  if (entry.empty()) return {};
  std::vector<fs::path> files{entry};
  if (entry.extension() == ".json") {
    for (const auto& shard : read_shard_map(entry)) files.push_back(shard.first);
  }
  return files;
}

TextEncoderConfig read_hf_text_folder(const fs::path& dir) {
  OML_CHECK(fs::is_directory(dir), DataError, dir.string(),
            ": no such folder (expected a Hugging Face model folder: config.json + model.safetensors or "
            "pytorch_model.bin)");
  const auto config = dir / "config.json";
  OML_CHECK(fs::is_regular_file(config), DataError, dir.string(),
            ": no config.json (a Hugging Face model folder has config.json next to its weights)");
  return read_text_config(config);
}

io::StateDict read_hf_weights(const fs::path& dir) {
  const fs::path entry = hf_weights_entry(dir);
  if (entry.extension() == ".json") return read_shards(entry);
  if (entry.filename() == "model.safetensors") return io::read_safetensors(entry).tensors;
  if (!entry.empty()) return io::find_state_dict(io::read_torch_file(entry), entry.string());
  std::vector<std::string> entries;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    entries.push_back(entry.path().filename().string());
  std::sort(entries.begin(), entries.end());
  if (entries.size() > 12) {
    entries.resize(12);
    entries.push_back("...");
  }
  throw DataError(dir.string() +
                  ": no model.safetensors or pytorch_model.bin (nor their .index.json shards) in the " +
                  "folder, which holds: " + (entries.empty() ? std::string("nothing") : join(entries)) +
                  " (TensorFlow's tf_model.h5 and Flax's flax_model.msgpack are not read)");
}

}  // namespace oml::models
