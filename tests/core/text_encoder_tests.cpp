// hf_text_encoder against transformers 5.24: tests/python/text_encoder_reference.py builds small
// BERT, RoBERTa, XLM-RoBERTa, CamemBERT and DistilBERT models with random weights, writes them as
// users have them (AutoModel's safetensors folders, task models' pytorch_model.bin, float16 and
// bfloat16 files) with transformers' outputs for a padded batch, and loads the folders oml-cpp
// writes back into transformers.
#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/common/precision.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/io/safetensors.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/extractor_with_mlp.h"
#include "oml/models/text_encoder.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace text_encoder_tests {

using Catch::Matchers::Contains;
using oml::models::TextEncoder;
using oml::models::TextEncoderOptions;
using oml::models::TextPooling;
using oml::test::error_text;
using oml::test::max_abs_diff;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFamilies = {"bert", "roberta", "xlm-roberta", "camembert", "distilbert"};

// Every model of text_encoder_reference.py (read-only: a test that adds files links them into a
// folder of its own).
const fs::path& exported() { return oml::test::reference_export("text_encoder_reference.py", "export"); }

oml::io::StateDict read_dict(const fs::path& path) {
  return oml::io::find_state_dict(oml::io::read_torch_file(path), path.string());
}

oml::models::TokenBatch batch_of(const fs::path& dir, const std::string& name) {
  const auto input = read_dict(dir / (name + "_input.pt"));
  oml::models::TokenBatch batch;
  batch.input_ids = input.at("input_ids");
  batch.attention_mask = input.at("attention_mask");
  if (name != "distilbert") batch.token_type_ids = input.at("token_type_ids");
  return batch;
}

TextEncoder load(const fs::path& folder, const std::string& pooling = "cls", bool normalise = false) {
  TextEncoderOptions options;
  options.model_dir = folder.string();
  options.pooling = pooling;
  options.normalise_features = normalise;
  TextEncoder model(options);
  model->eval();
  return model;
}

// The DataError message building the folder's model throws ("" when none).
std::string load_error(const fs::path& folder, const std::string& pooling = "cls") {
  try {
    (void)load(folder, pooling);
  } catch (const oml::DataError& e) {
    return error_text(e);
  }
  return "";
}

// `folder` copied to `copy` with config.json replaced by `config`.
void copy_with_config(const fs::path& folder, const fs::path& copy, const std::string& config) {
  fs::create_directories(copy);
  for (const auto& entry : fs::directory_iterator(folder))
    fs::copy(entry.path(), copy / entry.path().filename());
  oml::test::write_file(copy / "config.json", config);
}

std::string with_key(const std::string& config_json, const std::string& key_and_value) {
  const auto brace = config_json.find('{');
  return config_json.substr(0, brace + 1) + key_and_value + "," + config_json.substr(brace + 1);
}

}  // namespace

TEST_CASE(
    "BERT, RoBERTa, XLM-RoBERTa, CamemBERT and DistilBERT folders give transformers' hidden states and "
    "sentence-transformers' pooled embeddings on a padded batch",
    "[models][text][pytorch]") {
  const auto& dir = exported();
  torch::NoGradGuard no_grad;
  for (const auto& name : kFamilies) {
    INFO(name);
    const auto batch = batch_of(dir, name);
    const auto expected = read_dict(dir / (name + "_expected.pt"));
    auto model = load(dir / name);
    CHECK(max_abs_diff(model->hidden_states(batch), expected.at("hidden")) <= 1e-4);
    std::vector<std::string> poolings = {"cls", "mean", "max"};
    if (name != "distilbert") poolings.push_back("pooler");
    for (const auto& pooling : poolings) {
      INFO(pooling);
      CHECK(max_abs_diff(load(dir / name, pooling)->embed(batch), expected.at(pooling)) <= 1e-4);
      if (pooling == "pooler") continue;
      const auto normalised = load(dir / name, pooling, true)->embed(batch);
      CHECK(max_abs_diff(normalised, expected.at(pooling + "_normalised")) <= 1e-5);
    }
    // The extractor's own input: the batch packed into one tensor.
    const auto packed = oml::models::pack_tokens(batch);
    CHECK(packed.sizes() == torch::IntArrayRef({3, name == "distilbert" ? 2 : 3, 9}));
    CHECK(max_abs_diff(model->forward(packed), expected.at("cls")) <= 1e-4);
    CHECK(model->feat_dim() == expected.at("cls").size(1));
    CHECK(model->input() == oml::models::ExtractorInput::tokens);
  }
}

TEST_CASE(
    "pytorch_model.bin as task models save it (base-model prefix, head, position_ids, gamma and beta) and "
    "float16 / bfloat16 safetensors load as transformers loads them",
    "[models][text][pytorch]") {
  TempDir work;  // for folders of its own beside the export's
  oml::test::link_files(exported(), work.path());
  const fs::path& dir = work.path();
  torch::NoGradGuard no_grad;
  for (const auto& name : kFamilies) {
    INFO(name);
    const auto expected = read_dict(dir / (name + "_expected.pt"));
    CHECK(max_abs_diff(load(dir / (name + "_bin"), "mean")->embed(batch_of(dir, name)),
                       expected.at("mean")) <= 1e-4);
  }
  // save_pretrained's shards: model.safetensors.index.json naming five files.
  CHECK(max_abs_diff(load(dir / "bert_sharded")->hidden_states(batch_of(dir, "bert")),
                     read_dict(dir / "bert_expected.pt").at("hidden")) <= 1e-4);
  // An index may only name files beside it.
  fs::create_directories(dir / "bad_index");
  fs::copy(dir / "bert" / "config.json", dir / "bad_index" / "config.json");
  oml::test::write_file(
      dir / "bad_index" / "model.safetensors.index.json",
      R"({"weight_map": {"embeddings.word_embeddings.weight": "../bert/model.safetensors"}})");
  CHECK_THAT(load_error(dir / "bad_index"), Contains("model.safetensors.index.json") &&
                                                Contains("'../bert/model.safetensors'") &&
                                                Contains("not a file name in the index's folder"));
  // The task model's encoder has no pooler: pooling by it names the missing weights.
  CHECK_THAT(load_error(dir / "bert_bin", "pooler"), Contains("pooler.dense.weight") && Contains("missing"));
  for (const std::string dtype : {"f16", "bf16"}) {
    INFO(dtype);
    const auto expected = read_dict(dir / ("bert_" + dtype + "_expected.pt"));
    CHECK(max_abs_diff(load(dir / ("bert_" + dtype))->hidden_states(batch_of(dir, "bert")),
                       expected.at("hidden")) <= 1e-4);
  }
  // As `weights:` of a model built from another folder: a folder, a .safetensors, a .bin file.
  auto model = load(dir / "bert");
  {
    torch::NoGradGuard zero;
    for (auto& p : model->parameters()) p.zero_();
  }
  const auto batch = batch_of(dir, "bert");
  const auto expected = read_dict(dir / "bert_expected.pt").at("hidden");
  for (const auto& weights :
       {dir / "bert_bin", dir / "bert" / "model.safetensors", dir / "bert_bin" / "pytorch_model.bin"}) {
    INFO(weights);
    model->load_weights(weights.string());
    CHECK(max_abs_diff(model->hidden_states(batch), expected) <= 1e-4);
  }
  CHECK_THROWS_WITH(model->load_weights((dir / "roberta").string()), Contains("roberta model's folder"));
}

TEST_CASE("The text encoders' gradients equal transformers' through masked attention and pooling",
          "[models][text][pytorch]") {
  const auto& dir = exported();
  const std::vector<std::string> names = {"bert", "roberta", "distilbert"};
  for (const auto& name : names) {
    INFO(name);
    const auto expected = read_dict(dir / (name + "_expected.pt"));
    auto model = load(dir / name, "mean");
    model->zero_grad();
    (model->embed(batch_of(dir, name)) * expected.at("direction")).sum().backward();
    std::size_t compared = 0;
    for (const auto& p : model->named_parameters()) {
      INFO(p.key());
      const auto found = expected.find("grad." + p.key());
      REQUIRE(found != expected.end());
      REQUIRE(p.value().grad().defined());
      const double scale = std::max(1.0, found->second.abs().max().item<double>());
      CHECK(max_abs_diff(p.value().grad(), found->second) <= 1e-4 * scale);
      ++compared;
    }
    const auto gradients = std::count_if(expected.begin(), expected.end(),
                                         [](const auto& kv) { return kv.first.rfind("grad.", 0) == 0; });
    CHECK(compared == static_cast<std::size_t>(gradients));  // transformers' pooler gets none, ours is absent
  }
}

TEST_CASE(
    "Under bf16 autocast the text encoders stay within bfloat16's tolerance of transformers under autocast",
    "[models][text][precision][pytorch]") {
  const auto& dir = exported();
  torch::NoGradGuard no_grad;
  for (const auto& name : kFamilies) {
    INFO(name);
    const auto expected = read_dict(dir / (name + "_expected.pt"));
    auto model = load(dir / name, "mean");
    torch::Tensor hidden, mean;
    {
      oml::AutocastGuard autocast(oml::Precision::bf16, torch::kCPU);
      hidden = model->hidden_states(batch_of(dir, name));
      mean = model->embed(batch_of(dir, name));
    }
    CHECK(hidden.scalar_type() == torch::kFloat);  // the last op is a float32 LayerNorm, as in transformers
    // Two bfloat16 computations round differently (kernel choice, order of accumulation, and
    // which operators autocast lowers: LibTorch 1.13's lists are not 2.11's), so each is measured
    // against float32: oml-cpp's typical error is transformers' own under autocast (within a
    // factor of 2), and its worst element is off by at most 4 bfloat16 ulps at the scale of the
    // outputs (8 bits of mantissa: an ulp is 1/128 of the power of two below) or by at most 3x
    // transformers' own worst. The worst elements of two bfloat16 computations differ between CPUs
    // more than their means do (1.13's roberta: 4.25 ulps on CI's CPU, 3.1 on an Intel Xeon;
    // transformers' 2.5 there); an element computed wrongly is off by about the outputs' scale,
    // an order of magnitude more.
    const auto& fp32 = expected.at("hidden");
    const double ours_avg = (hidden - fp32).abs().mean().item<double>();
    const double theirs_avg = (expected.at("hidden_bf16") - fp32).abs().mean().item<double>();
    const double ours_max = max_abs_diff(hidden, fp32);
    const double theirs_max = max_abs_diff(expected.at("hidden_bf16"), fp32);
    const double ulp = std::exp2(std::floor(std::log2(fp32.abs().max().item<double>())) - 7);
    INFO("mean |oml bf16 - fp32| = " << ours_avg << ", mean |transformers bf16 - fp32| = " << theirs_avg
                                     << ", max |oml bf16 - fp32| = " << ours_max
                                     << ", max |transformers bf16 - fp32| = " << theirs_max << ", ulp "
                                     << ulp);
    CHECK(ours_avg <= 2 * theirs_avg);
    CHECK(ours_max <= std::max(4 * ulp, 3 * theirs_max));
    CHECK(max_abs_diff(mean, expected.at("mean_bf16")) <= 0.05);
  }
}

TEST_CASE("Every implemented hidden_act computes what transformers' ACT2FN does", "[models][text][pytorch]") {
  const auto& dir = exported();
  std::vector<std::string> names;
  for (const auto& act : oml::models::text_activation_names()) {
    if (act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "relu")
      names.push_back("bert_" + act);
  }
  // gelu, gelu_new, gelu_pytorch_tanh and relu are the families' own (see the first test).
  torch::NoGradGuard no_grad;
  for (const auto& name : names) {
    INFO(name);
    const auto expected = read_dict(dir / (name + "_expected.pt"));
    CHECK(max_abs_diff(load(dir / name)->hidden_states(batch_of(dir, name)), expected.at("hidden")) <= 1e-4);
  }
}

TEST_CASE(
    "A folder oml-cpp saves after a training step loads in transformers' AutoModel with the same outputs",
    "[models][text][pytorch]") {
  TempDir work;  // for the saved folders beside the export's
  oml::test::link_files(exported(), work.path());
  const fs::path& dir = work.path();
  for (const auto& name : kFamilies) {
    INFO(name);
    auto model = load(dir / name, "mean");
    model->train();  // dropout on
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05));
    sgd.zero_grad();
    model->embed(batch_of(dir, name)).pow(2).sum().backward();
    sgd.step();
    model->eval();
    torch::NoGradGuard no_grad;
    const auto hidden = model->hidden_states(batch_of(dir, name));
    CHECK(max_abs_diff(hidden, read_dict(dir / (name + "_expected.pt")).at("hidden")) > 1e-3);  // it moved
    model->save_pretrained(dir / ("oml_" + name));
    oml::io::save_tensor(dir / ("oml_" + name + "_hidden.pt"), hidden);
    // And back: the saved folder gives the same model here.
    CHECK(max_abs_diff(load(dir / ("oml_" + name))->hidden_states(batch_of(dir, name)), hidden) == 0.0);
  }
  // All five folders in one Python process: a transformers import costs seconds.
  oml::test::run_reference("text_encoder_reference.py", "check", dir, {oml::join(kFamilies, ",")});
}

TEST_CASE("A text encoder is built by name from a config, alone and inside extractor_with_mlp",
          "[models][text][registry][pytorch]") {
  oml::cli::register_builtins();
  const auto& dir = exported();
  const auto doc = oml::config::Document::from_string(
      "extractor: {name: hf_text_encoder, args: {model_dir: " + (dir / "bert").string() +
          ", pooling: mean, normalise_features: true}}\n"
          "mlp: {name: extractor_with_mlp, args: {mlp_features: [8], extractor: {name: hf_text_encoder, "
          "args: "
          "{model_dir: " +
          (dir / "bert").string() + "}}}}\n",
      "model.yaml");
  auto extractor =
      oml::registries().extractors.create(oml::config::parse_component(doc.root()["extractor"], "extractor"));
  extractor->eval();
  torch::NoGradGuard no_grad;
  const auto packed = oml::models::pack_tokens(batch_of(dir, "bert"));
  CHECK(max_abs_diff(extractor->forward(packed), read_dict(dir / "bert_expected.pt").at("mean_normalised")) <=
        1e-5);
  CHECK(extractor->input() == oml::models::ExtractorInput::tokens);

  auto mlp = oml::registries().extractors.create(oml::config::parse_component(doc.root()["mlp"], "mlp"));
  CHECK(mlp->input() == oml::models::ExtractorInput::tokens);
  CHECK(mlp->forward(packed).sizes() == torch::IntArrayRef({3, 8}));
  // OML's ExtractorWithMLP(HFWrapper(model)): the encoder under extractor.model.
  const auto names = oml::io::state_dict(*mlp);
  CHECK(names.count("extractor.model.embeddings.word_embeddings.weight") == 1);
  CHECK(names.count("extractor.model.encoder.layer.1.output.LayerNorm.bias") == 1);

  // Parse errors, reported with the config's position and before any file is read.
  const auto bad = oml::config::Document::from_string(
      "a: {name: hf_text_encoder, args: {model_dir: /nonexistent/folder, pooling: avg}}\n"
      "b: {name: hf_text_encoder, args: {model_dir: /nonexistent/folder}}\n"
      "c: {name: hf_text_encoder, args: {pooling: mean}}\n",
      "bad.yaml");
  auto parse_error = [&](const char* key) {
    oml::config::ErrorList errors;
    (void)oml::registries().extractors.parse(oml::config::parse_component(bad.root()[key], key), errors);
    try {
      errors.throw_if_any();
    } catch (const oml::ConfigError& e) {
      return error_text(e);
    }
    return std::string();
  };
  CHECK_THAT(parse_error("a"), Contains("bad.yaml:1") && Contains("pooling") &&
                                   Contains("unknown pooling 'avg'") && Contains("cls, mean, max, pooler"));
  CHECK_THAT(parse_error("c"), Contains("bad.yaml:3") && Contains("missing required key 'model_dir'"));
  CHECK(parse_error("b").empty());
  CHECK_THROWS_WITH(oml::registries().extractors.create(oml::config::parse_component(bad.root()["b"], "b")),
                    Contains("/nonexistent/folder") && Contains("no such folder"));
}

TEST_CASE(
    "Folders that are not BERT-shaped encoders, or whose weights do not fit, are refused naming what is "
    "wrong",
    "[models][text][pytorch]") {
  TempDir work;  // for the edited folders beside the export's
  oml::test::link_files(exported(), work.path());
  const fs::path& dir = work.path();
  const std::string config = oml::test::read_file(dir / "bert" / "config.json");
  struct Case {
    std::string what;
    std::string config;
    std::vector<std::string> says;
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string text = config;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  const std::vector<Case> cases = {
      {"mpnet",
       replace("\"model_type\": \"bert\"", "\"model_type\": \"mpnet\""),
       {"model_type 'mpnet' is not supported", "relative position bias", "bert, roberta"}},
      {"gte v1.5", replace("\"model_type\": \"bert\"", "\"model_type\": \"new\""), {"'new'", "GTE v1.5"}},
      {"no model_type", replace("\"model_type\": \"bert\",", ""), {"no 'model_type'"}},
      {"relative positions",
       with_key(config, "\"position_embedding_type\": \"relative_key\""),
       {"position_embedding_type \"relative_key\"", "absolute"}},
      {"a decoder", replace("\"is_decoder\": false", "\"is_decoder\": true"), {"'is_decoder' is true"}},
      {"custom code",
       with_key(
           config,
           R"("auto_map": {"AutoModel": "jinaai/jina-bert-implementation--modeling_bert.JinaBertModel"})"),
       {"auto_map", "JinaBertModel"}},
      {"an unknown activation",
       replace("\"hidden_act\": \"gelu\"", "\"hidden_act\": \"gelu_new2\""),
       {"'hidden_act' \"gelu_new2\" is not supported", "did you mean"}},
      {"heads not dividing",
       replace("\"num_attention_heads\": 4", "\"num_attention_heads\": 5"),
       {"not a multiple of 'num_attention_heads' 5"}},
      {"a string size",
       replace("\"hidden_size\": 32", "\"hidden_size\": \"32\""),
       {"'hidden_size' must be an integer"}},
      {"other shapes",
       replace("\"intermediate_size\": 48", "\"intermediate_size\": 40"),
       {"shape differs", "encoder.layer.0.intermediate.dense.weight", "[48, 32]", "[40, 32]"}},
      {"not JSON", "{\"model_type\": ", {"not valid JSON"}},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const auto folder = dir / ("case_" + std::to_string(&c - cases.data()));
    copy_with_config(dir / "bert", folder, c.config);
    const std::string message = load_error(folder);
    CHECK_THAT(message, Contains((folder / "config.json").string()) || Contains(folder.string()));
    for (const auto& part : c.says) CHECK_THAT(message, Contains(part));
  }

  // Missing and unexpected weights are named; a missing weights file lists the folder.
  auto tensors = oml::io::read_safetensors(dir / "bert" / "model.safetensors").tensors;
  tensors.erase("encoder.layer.1.attention.self.key.bias");
  tensors.emplace("encoder.layer.1.attention.self.extra", torch::zeros({2}));
  fs::create_directories(dir / "edited");
  fs::copy(dir / "bert" / "config.json", dir / "edited" / "config.json");
  oml::io::write_safetensors(dir / "edited" / "model.safetensors", tensors);
  const std::string message = load_error(dir / "edited");
  CHECK_THAT(message, Contains("missing in the file: encoder.layer.1.attention.self.key.bias"));
  CHECK_THAT(message, Contains("unexpected in the file: encoder.layer.1.attention.self.extra"));
  fs::remove(dir / "edited" / "model.safetensors");
  CHECK_THAT(load_error(dir / "edited"),
             Contains("no model.safetensors or pytorch_model.bin") && Contains("config.json"));
  CHECK_THAT(load_error(dir / "nowhere"), Contains("no such folder"));
  // A truncated weights file names the file.
  const std::string bytes = oml::test::read_file(dir / "bert" / "model.safetensors");
  oml::test::write_file(dir / "edited" / "model.safetensors", bytes.substr(0, bytes.size() - 100));
  CHECK_THAT(load_error(dir / "edited"), Contains("model.safetensors") && Contains("truncated"));
  CHECK_THAT(load_error(dir / "distilbert", "pooler"), Contains("DistilBERT has no pooler"));
}

TEST_CASE("Token batches the encoder cannot take are DataErrors saying why", "[models][text][pytorch]") {
  const auto& dir = exported();
  torch::NoGradGuard no_grad;
  auto bert = load(dir / "bert");
  const auto batch = batch_of(dir, "bert");
  auto with = [&](const std::function<void(oml::models::TokenBatch&)>& change) {
    oml::models::TokenBatch b{batch.input_ids.clone(), batch.attention_mask.clone(),
                              batch.token_type_ids.clone()};
    change(b);
    return b;
  };
  auto message = [&](TextEncoder& model, const oml::models::TokenBatch& b) -> std::string {
    try {
      (void)model->hidden_states(b);
    } catch (const oml::DataError& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(message(bert, with([](auto& b) { b.input_ids[0][1] = 99; })),
             Contains("token id 99 is outside the vocabulary [0, 99)"));
  CHECK_THAT(message(bert, with([](auto& b) { b.token_type_ids[0][1] = 2; })), Contains("type_vocab_size 2"));
  CHECK_THAT(message(bert, with([](auto& b) { b.attention_mask[2].zero_(); })),
             Contains("row 2 of the attention mask has no token"));
  CHECK_THAT(message(bert, with([](auto& b) { b.attention_mask[1][0] = 3; })), Contains("must be 0 or 1"));
  const auto long_ids = torch::ones({1, 25}, torch::kLong);
  CHECK_THAT(message(bert, {long_ids, torch::ones_like(long_ids), {}}),
             Contains("texts of 25 tokens") && Contains("24 positions"));
  auto roberta = load(dir / "roberta");
  const auto ids = torch::full({1, 23}, 5, torch::kLong);  // positions 2 .. 24 with pad_token_id 1
  CHECK_THAT(message(roberta, {ids, torch::ones_like(ids), {}}),
             Contains("needs position 24") && Contains("at most 22 tokens"));
  auto distilbert = load(dir / "distilbert");
  auto typed = batch_of(dir, "distilbert");
  typed.token_type_ids = torch::zeros_like(typed.input_ids);
  CHECK(message(distilbert, typed).empty());  // all zeros: what transformers assumes anyway
  typed.token_type_ids[0][0] = 1;
  CHECK_THAT(message(distilbert, typed), Contains("DistilBERT has no token types"));
  CHECK_THROWS_WITH(bert->forward(torch::randn({2, 3, 8, 8})),
                    Contains("expected packed tokens [B, 2 | 3, L]") && Contains("[2, 3, 8, 8] floats") &&
                        Contains("an image batch"));
  CHECK_THROWS_WITH(bert->forward(torch::randn({2, 2, 8})), Contains("expected integer token ids"));
}

TEST_CASE("A text encoder built from a config has transformers' initialisation and names", "[models][text]") {
  auto config = oml::models::default_text_config("distilbert");
  config.hidden_size = 16;
  config.num_attention_heads = 2;
  config.num_hidden_layers = 1;
  config.intermediate_size = 20;
  config.vocab_size = 50;
  config.max_position_embeddings = 12;
  config.sinusoidal_pos_embds = true;
  TextEncoder model(config);
  const auto names = oml::io::state_dict(*model);
  CHECK(names.count("transformer.layer.0.attention.q_lin.weight") == 1);
  CHECK(names.count("transformer.layer.0.ffn.lin2.bias") == 1);
  CHECK(names.count("embeddings.token_type_embeddings.weight") == 0);
  CHECK(names.at("embeddings.word_embeddings.weight")[0].abs().max().item<double>() == 0.0);  // pad row
  const auto table = names.at("embeddings.position_embeddings.weight");
  CHECK(table[3][0].item<double>() == Approx(std::sin(3.0)));
  CHECK(table[3][1].item<double>() == Approx(std::cos(3.0)));
  CHECK(table[5][4].item<double>() == Approx(std::sin(5.0 / std::pow(10000.0, 4.0 / 16))));
  CHECK(names.at("transformer.layer.0.sa_layer_norm.weight").eq(1).all().item<bool>());
  CHECK(names.at("transformer.layer.0.attention.out_lin.bias").eq(0).all().item<bool>());
  const double std = names.at("transformer.layer.0.ffn.lin1.weight").std().item<double>();
  CHECK(std == Approx(0.02).epsilon(0.25));

  auto roberta = oml::models::default_text_config("xlm-roberta");
  roberta.hidden_size = 8;
  roberta.num_attention_heads = 2;
  roberta.num_hidden_layers = 1;
  roberta.intermediate_size = 8;
  roberta.vocab_size = 20;
  roberta.max_position_embeddings = 10;
  TextEncoder xlmr(roberta, TextPooling::pooler);
  const auto xlmr_names = oml::io::state_dict(*xlmr);
  CHECK(xlmr_names.count("pooler.dense.weight") == 1);
  CHECK(xlmr_names.at("embeddings.position_embeddings.weight")[1].abs().max().item<double>() == 0.0);
  CHECK(oml::models::text_model_class(roberta) == "XLMRobertaModel");
  CHECK(oml::models::text_base_prefix(roberta) == "roberta");
  CHECK_THROWS_WITH(oml::models::default_text_config("modernbert"), Contains("rotary"));
}

}  // namespace text_encoder_tests
