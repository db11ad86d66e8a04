#include "oml/models/text_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "oml/common/error.h"
#include "oml/common/strings.h"

namespace oml::models {
namespace {

using nlohmann::json;

// Why the BERT-like model types one meets among sentence models are not run as BERT.
const std::map<std::string, std::string>& refused_reasons() {
  static const std::map<std::string, std::string> reasons = {
      {"new", "GTE v1.5 / gte-multilingual: rotary position embeddings and the repository's own code"},
      {"nomic_bert", "rotary position embeddings and SwiGLU"},
      {"modernbert", "rotary position embeddings, local attention and GeGLU"},
      {"mpnet", "relative position bias in every layer"},
      {"deberta", "disentangled attention"},
      {"deberta-v2", "disentangled attention"},
      {"xlm-roberta-xl", "LayerNorm before each sublayer (pre-norm)"},
      {"roberta-prelayernorm", "LayerNorm before each sublayer (pre-norm)"},
      {"electra", "an embedding projection (embedding_size) and ELECTRA's names"},
      {"albert", "factorised embeddings and one layer shared by the whole stack"},
      {"ernie", "task type embeddings"},
  };
  return reasons;
}

// DistilBERT's config.json names for the fields whose BERT names the struct uses.
struct FieldNames {
  const char* hidden_size;
  const char* layers;
  const char* heads;
  const char* intermediate;
  const char* act;
  const char* dropout;
  const char* attention_dropout;
};
constexpr FieldNames kBertNames{
    "hidden_size", "num_hidden_layers",   "num_attention_heads",         "intermediate_size",
    "hidden_act",  "hidden_dropout_prob", "attention_probs_dropout_prob"};
constexpr FieldNames kDistilBertNames{"dim",        "n_layers", "n_heads",          "hidden_dim",
                                      "activation", "dropout",  "attention_dropout"};

const FieldNames& names_for(TextFamily family) {
  return family == TextFamily::distilbert ? kDistilBertNames : kBertNames;
}

std::string type_name(const json& value) {
  if (value.is_null()) return "null";
  return value.type_name();
}

// Reads `key` of `doc` into `out` when present; DataError naming the file and key otherwise.
class Reader {
 public:
  Reader(const json& doc, std::string source) : doc_(doc), source_(std::move(source)) {}

  void integer(const char* key, int64_t& out) const {
    if (const auto* v = find(key)) {
      if (!v->is_number_integer()) fail(key, "an integer", *v);
      out = v->get<int64_t>();
    }
  }
  void optional_integer(const char* key, std::optional<int64_t>& out) const {
    if (const auto* v = find(key)) {
      if (v->is_null()) {
        out.reset();
      } else {
        if (!v->is_number_integer()) fail(key, "an integer or null", *v);
        out = v->get<int64_t>();
      }
    }
  }
  void number(const char* key, double& out) const {
    if (const auto* v = find(key)) {
      if (!v->is_number()) fail(key, "a number", *v);
      out = v->get<double>();
    }
  }
  void text(const char* key, std::string& out) const {
    if (const auto* v = find(key)) {
      if (!v->is_string()) fail(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void boolean(const char* key, bool& out) const {
    if (const auto* v = find(key)) {
      if (!v->is_boolean()) fail(key, "true or false", *v);
      out = v->get<bool>();
    }
  }
  const json* find(const char* key) const {
    const auto it = doc_.find(key);
    return it == doc_.end() ? nullptr : &*it;
  }
  [[noreturn]] void fail(const char* key, const std::string& expected, const json& got) const {
    throw DataError(source_ + ": '" + key + "' must be " + expected + ", got " + got.dump() + " (" +
                    type_name(got) + ")");
  }

 private:
  const json& doc_;
  std::string source_;
};

// What transformers would run differently from the encoder built here.
void refuse_other_variants(const Reader& r, const TextEncoderConfig& c, const std::string& source) {
  if (const auto* v = r.find("position_embedding_type"); v != nullptr && !v->is_null() && *v != "absolute") {
    throw DataError(source + ": position_embedding_type " + v->dump() +
                    " is not supported: only absolute (learned) position embeddings are");
  }
  for (const char* key : {"is_decoder", "add_cross_attention"}) {
    bool on = false;
    r.boolean(key, on);
    OML_CHECK(!on, DataError, source, ": '", key,
              "' is true: only encoders (bidirectional self-attention) are supported");
  }
  if (const auto* v = r.find("embedding_size"); v != nullptr && !v->is_null() && *v != c.hidden_size) {
    throw DataError(source + ": embedding_size " + v->dump() + " differs from the hidden size " +
                    std::to_string(c.hidden_size) +
                    " (an embedding projection, which BERT encoders do not have)");
  }
  if (const auto* v = r.find("auto_map"); v != nullptr && v->is_object() && v->contains("AutoModel")) {
    throw DataError(source + ": auto_map names the repository's own code for AutoModel (" +
                    v->at("AutoModel").dump() + "): transformers runs that code, not its " +
                    text_model_class(c) + ", so the weights are not known to be a " + c.model_type +
                    " encoder's");
  }
}

}  // namespace

const std::vector<std::string>& text_model_types() {
  static const std::vector<std::string> types = {"bert", "roberta", "xlm-roberta", "camembert", "distilbert"};
  return types;
}

const std::vector<std::string>& text_activation_names() {
  static const std::vector<std::string> names = {"gelu",
                                                 "gelu_python",
                                                 "gelu_new",
                                                 "gelu_fast",
                                                 "gelu_accurate",
                                                 "gelu_pytorch_tanh",
                                                 "gelu_python_tanh",
                                                 "quick_gelu",
                                                 "relu",
                                                 "silu",
                                                 "swish",
                                                 "tanh"};
  return names;
}

TextFamily text_family(const TextEncoderConfig& config) {
  if (config.model_type == "bert") return TextFamily::bert;
  if (config.model_type == "distilbert") return TextFamily::distilbert;
  if (config.model_type == "roberta" || config.model_type == "xlm-roberta" ||
      config.model_type == "camembert") {
    return TextFamily::roberta;
  }
  throw InternalError("text_family: model_type '" + config.model_type + "' passed no check");
}

std::string text_model_class(const TextEncoderConfig& config) {
  static const std::map<std::string, std::string> classes = {{"bert", "BertModel"},
                                                             {"roberta", "RobertaModel"},
                                                             {"xlm-roberta", "XLMRobertaModel"},
                                                             {"camembert", "CamembertModel"},
                                                             {"distilbert", "DistilBertModel"}};
  const auto it = classes.find(config.model_type);
  return it == classes.end() ? config.model_type : it->second;
}

std::string text_base_prefix(const TextEncoderConfig& config) {
  switch (text_family(config)) {
    case TextFamily::bert:
      return "bert";
    case TextFamily::roberta:
      return "roberta";
    case TextFamily::distilbert:
      return "distilbert";
  }
  return "";
}

TextEncoderConfig default_text_config(const std::string& model_type) {
  const auto& supported = text_model_types();
  if (std::find(supported.begin(), supported.end(), model_type) == supported.end()) {
    const auto reason = refused_reasons().find(model_type);
    DataError error("model_type '" + model_type + "' is not supported" +
                    (reason != refused_reasons().end() ? " (" + reason->second + ")" : std::string()) +
                    "; the text encoder runs " + join(supported));
    throw error;
  }
  TextEncoderConfig c;
  c.model_type = model_type;
  // transformers 5.24's config classes: RobertaConfig and XLMRobertaConfig keep BERT's numbers
  // except the special tokens (pad 1); CamembertConfig likewise.
  if (model_type != "bert" && model_type != "distilbert") c.pad_token_id = 1;
  if (model_type == "roberta") c.vocab_size = 50265;
  if (model_type == "distilbert") c.type_vocab_size = 0;
  return c;
}

void check_text_config(const TextEncoderConfig& c, const std::string& source) {
  try {
    (void)default_text_config(c.model_type);
  } catch (const DataError& e) {
    throw DataError(source + ": " + e.what());
  }
  const auto& n = names_for(text_family(c));
  auto positive = [&](const char* key, int64_t value) {
    OML_CHECK(value >= 1, DataError, source, ": '", key, "' must be at least 1, got ", value);
  };
  positive("vocab_size", c.vocab_size);
  positive(n.hidden_size, c.hidden_size);
  positive(n.layers, c.num_hidden_layers);
  positive(n.heads, c.num_attention_heads);
  positive(n.intermediate, c.intermediate_size);
  positive("max_position_embeddings", c.max_position_embeddings);
  OML_CHECK(c.hidden_size % c.num_attention_heads == 0, DataError, source, ": '", n.hidden_size, "' ",
            c.hidden_size, " is not a multiple of '", n.heads, "' ", c.num_attention_heads);
  if (text_family(c) != TextFamily::distilbert) positive("type_vocab_size", c.type_vocab_size);
  OML_CHECK(c.layer_norm_eps > 0, DataError, source, ": 'layer_norm_eps' must be positive, got ",
            c.layer_norm_eps);
  OML_CHECK(c.initializer_range >= 0, DataError, source, ": 'initializer_range' must be >= 0, got ",
            c.initializer_range);
  const std::vector<std::pair<const char*, double>> dropouts = {
      {n.dropout, c.hidden_dropout_prob}, {n.attention_dropout, c.attention_probs_dropout_prob}};
  for (const auto& [key, p] : dropouts) {
    OML_CHECK(p >= 0 && p < 1, DataError, source, ": '", key, "' must be in [0, 1), got ", p);
  }
  const auto& acts = text_activation_names();
  OML_CHECK(std::find(acts.begin(), acts.end(), c.hidden_act) != acts.end(), DataError, source, ": '", n.act,
            "' \"", c.hidden_act, "\" is not supported", did_you_mean(c.hidden_act, acts),
            "; expected one of ", join(acts));
  if (c.pad_token_id) {
    OML_CHECK(*c.pad_token_id >= 0 && *c.pad_token_id < c.vocab_size, DataError, source, ": 'pad_token_id' ",
              *c.pad_token_id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  }
  if (text_family(c) == TextFamily::roberta) {
    OML_CHECK(c.pad_token_id.has_value(), DataError, source, ": ", c.model_type,
              " needs 'pad_token_id' (its position ids start after it)");
    OML_CHECK(c.max_position_embeddings > *c.pad_token_id + 1, DataError, source,
              ": 'max_position_embeddings' ", c.max_position_embeddings,
              " leaves no position after pad_token_id ", *c.pad_token_id,
              " (positions start at pad_token_id + 1)");
  }
}

TextEncoderConfig read_text_config(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream in(path);
  if (!in) throw DataError(source + ": cannot open the model's config.json");
  std::ostringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::exception& e) {
    throw DataError(source + ": not valid JSON (" + e.what() + ")");
  }
  OML_CHECK(doc.is_object(), DataError, source, ": expected a JSON object, got ", type_name(doc));
  const Reader r(doc, source);
  const auto* type = r.find("model_type");
  OML_CHECK(type != nullptr, DataError, source, ": no 'model_type' (expected one of ",
            join(text_model_types()), ")");
  OML_CHECK(type->is_string(), DataError, source, ": 'model_type' must be a string, got ", type->dump());
  TextEncoderConfig c;
  try {
    c = default_text_config(type->get<std::string>());
  } catch (const DataError& e) {
    throw DataError(source + ": " + e.what());
  }
  const auto& n = names_for(text_family(c));
  r.integer("vocab_size", c.vocab_size);
  r.integer(n.hidden_size, c.hidden_size);
  r.integer(n.layers, c.num_hidden_layers);
  r.integer(n.heads, c.num_attention_heads);
  r.integer(n.intermediate, c.intermediate_size);
  r.text(n.act, c.hidden_act);
  r.number(n.dropout, c.hidden_dropout_prob);
  r.number(n.attention_dropout, c.attention_probs_dropout_prob);
  r.integer("max_position_embeddings", c.max_position_embeddings);
  r.optional_integer("pad_token_id", c.pad_token_id);
  r.number("initializer_range", c.initializer_range);
  if (text_family(c) == TextFamily::distilbert) {
    r.boolean("sinusoidal_pos_embds", c.sinusoidal_pos_embds);
  } else {
    r.integer("type_vocab_size", c.type_vocab_size);
    r.number("layer_norm_eps", c.layer_norm_eps);
  }
  refuse_other_variants(r, c, source);
  check_text_config(c, source);
  c.source_json = text.str();
  return c;
}

std::string text_config_json(const TextEncoderConfig& c) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  if (!c.source_json.empty()) doc = nlohmann::ordered_json::parse(c.source_json);
  const auto& n = names_for(text_family(c));
  doc["architectures"] = nlohmann::ordered_json::array({text_model_class(c)});
  doc["model_type"] = c.model_type;
  doc["vocab_size"] = c.vocab_size;
  doc[n.hidden_size] = c.hidden_size;
  doc[n.layers] = c.num_hidden_layers;
  doc[n.heads] = c.num_attention_heads;
  doc[n.intermediate] = c.intermediate_size;
  doc[n.act] = c.hidden_act;
  doc[n.dropout] = c.hidden_dropout_prob;
  doc[n.attention_dropout] = c.attention_probs_dropout_prob;
  doc["max_position_embeddings"] = c.max_position_embeddings;
  if (c.pad_token_id) {
    doc["pad_token_id"] = *c.pad_token_id;
  } else {
    doc["pad_token_id"] = nullptr;
  }
  doc["initializer_range"] = c.initializer_range;
  if (text_family(c) == TextFamily::distilbert) {
    doc["sinusoidal_pos_embds"] = c.sinusoidal_pos_embds;
  } else {
    doc["type_vocab_size"] = c.type_vocab_size;
    doc["layer_norm_eps"] = c.layer_norm_eps;
  }
  // The weights written next to it are float32 (transformers 5 would otherwise load them in the
  // dtype the config names).
  doc.erase("torch_dtype");
  doc["dtype"] = "float32";
  return doc.dump(2) + "\n";
}

}  // namespace oml::models
