// Text dataframes (a `text` column in place of `path`, Rule 10 of docs/contracts.md#dataframe) and
// the text dataset: each row's tokens from the tokenizer, batches padded to their longest text
// with the attention mask 0 on the padding, truncation to the model's length, and what the text
// extractors say about their tokenizer (TextInputSource). The tokenizer and model are the tiny
// ones of tests/support/text_fixtures.h: nothing is downloaded.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/dataframe.h"
#include "oml/data/loader.h"
#include "oml/data/text_dataset.h"
#include "oml/models/conv_net.h"
#include "oml/models/text_encoder.h"
#include "oml/models/text_input.h"
#include "oml/models/token_batch.h"
#include "oml/registry/registries.h"
#include "oml/text/tokenizer.h"
#include "shell/components.h"
#include "support/support.h"
#include "support/text_fixtures.h"

namespace data_text_tests {

using Catch::Matchers::Contains;
using oml::data::Dataframe;
using oml::data::DataframeOptions;
using oml::data::TextDataset;
using oml::data::TextDatasetOptions;
using oml::test::TempDir;
using oml::test::TinyTokenizerOptions;
namespace fs = std::filesystem;

namespace {

DataframeOptions text_options() {
  DataframeOptions options;
  options.check_files = false;
  options.dataset_root = "/data";
  options.accept_text_dataframes = true;
  return options;
}

Dataframe parse_texts(const std::string& csv) { return Dataframe::parse(csv, "df.csv", text_options()); }

std::string text_error(const std::string& csv) {
  try {
    parse_texts(csv);
  } catch (const oml::DataError& e) {
    return e.what();
  }
  FAIL("expected a DataError for:\n" << csv);
  return "";
}

oml::text::Tokenizer tiny_tokenizer(const TinyTokenizerOptions& options = {}) {
  return oml::text::Tokenizer::from_json(oml::test::tiny_tokenizer_json(options), "tiny/tokenizer.json");
}

int64_t id_of(const std::string& token) {
  const auto id = tiny_tokenizer().token_to_id(token);
  REQUIRE(id.has_value());
  return *id;
}

// A train split of `texts`, labels 0, 1, 2, ... (lines 2, 3, ...).
oml::data::DataSplit train_texts(const std::vector<std::string>& texts) {
  std::string csv = "label,text,split,is_query,is_gallery\n";
  for (std::size_t i = 0; i < texts.size(); ++i) csv += std::to_string(i) + ",\"" + texts[i] + "\",train,,\n";
  return parse_texts(csv).train();
}

std::shared_ptr<TextDataset> text_dataset(const std::vector<std::string>& texts,
                                          TextDatasetOptions options = {},
                                          const TinyTokenizerOptions& tokenizer = {}) {
  options.source = "df.csv";
  return std::make_shared<TextDataset>(
      train_texts(texts), oml::data::prepare_tokenizer(tiny_tokenizer(tokenizer), options.max_tokens),
      options);
}

std::vector<int64_t> values(const at::Tensor& row) {
  const at::Tensor flat = row.contiguous().to(torch::kInt64);
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

}  // namespace

TEST_CASE("Rule 10: a text dataframe reads its texts as written, in place of paths",
          "[data][dataframe][text]") {
  const auto df = parse_texts(
      "label,text,split,is_query,is_gallery,category\n"
      "1,\"  Hello, world \",train,,,a\n"
      "2,second text,train,,,b\n"
      "3,\"a query\nover two lines\",validation,True,True,c\n");
  CHECK(df.is_text_dataframe());
  CHECK(df.has_column("text"));
  CHECK_FALSE(df.has_column("path"));
  CHECK(df.columns() ==
        std::vector<std::string>{"label", "text", "split", "is_query", "is_gallery", "category"});
  CHECK(df.train().texts == std::vector<std::string>{"  Hello, world ", "second text"});
  CHECK_FALSE(df.train().has_paths());
  CHECK(df.train().labels == std::vector<int64_t>{0, 1});
  CHECK(df.validation().texts == std::vector<std::string>{"a query\nover two lines"});
  CHECK(df.validation().categories == std::vector<std::string>{"c"});

  // Where a caller wants images only, the text dataframe is a missing `path`.
  DataframeOptions images = text_options();
  images.accept_text_dataframes = false;
  CHECK_THROWS_WITH(Dataframe::parse("label,text,split,is_query,is_gallery\n1,a,train,,\n", "df.csv", images),
                    Contains("df.csv:1: missing required column(s) path"));
  // With both columns the paths are required (and read) as before, and the texts are read too.
  const auto both = parse_texts("label,path,text,split,is_query,is_gallery\n1,a.jpg,an apple,train,,\n");
  CHECK_FALSE(both.is_text_dataframe());
  CHECK(both.train().paths == std::vector<std::string>{"/data/a.jpg"});
  CHECK(both.train().texts == std::vector<std::string>{"an apple"});

  // limit_val_batches keeps the texts of the rows it keeps.
  auto limited = parse_texts(
      "label,text,split,is_query,is_gallery\n"
      "1,one,validation,True,True\n1,two,validation,True,True\n2,three,validation,True,True\n"
      "2,four,validation,True,True\n");
  limited.keep_first_validation_rows(2);
  CHECK(limited.validation().texts == std::vector<std::string>{"one", "two"});
}

TEST_CASE("Rule 10: a blank, empty or non-UTF-8 text names the file, the line and the column",
          "[data][dataframe][text]") {
  const std::string header = "label,text,split,is_query,is_gallery\n";
  CHECK_THAT(text_error(header + "1,fine,train,,\n2,,train,,\n"),
             Contains("df.csv:3: column 'text': got '', expected a text"));
  CHECK_THAT(text_error(header + "1,\"   \",train,,\n"),
             Contains("df.csv:2: column 'text': got '   ', expected a text"));
  CHECK_THAT(text_error(header + "1,caf\xE9,train,,\n"),
             Contains("df.csv:2: column 'text': the text is not valid UTF-8"));
  // The other rules hold for text dataframes as for images.
  CHECK_THAT(text_error(header + "x,a text,train,,\n"), Contains("df.csv:2: column 'label': got 'x'"));
}

TEST_CASE("prepare_tokenizer truncates to the model's length and leaves the padding to the batches",
          "[data][text]") {
  const auto plain = oml::data::prepare_tokenizer(tiny_tokenizer(), 8);
  REQUIRE(plain->truncation().has_value());
  CHECK(plain->truncation()->max_length == 8);
  CHECK(plain->truncation()->stride == 0);
  CHECK_FALSE(plain->padding().has_value());

  TinyTokenizerOptions shorter;
  shorter.truncation = 6;
  CHECK(oml::data::prepare_tokenizer(tiny_tokenizer(shorter), 8)->truncation()->max_length == 6);
  TinyTokenizerOptions longer;
  longer.truncation = 20;
  longer.fixed_padding = 16;
  const auto capped = oml::data::prepare_tokenizer(tiny_tokenizer(longer), 8);
  CHECK(capped->truncation()->max_length == 8);
  CHECK_FALSE(capped->padding().has_value());
  // A file that truncates to no token of text beside [CLS] [SEP] is named, with the key: every
  // text would embed the same.
  TinyTokenizerOptions zero;
  zero.truncation = 0;
  CHECK_THROWS_AS(oml::data::prepare_tokenizer(tiny_tokenizer(zero), 8), oml::ConfigError);
  CHECK_THROWS_WITH(oml::data::prepare_tokenizer(tiny_tokenizer(zero), 8),
                    Contains("tiny/tokenizer.json: truncation.max_length is 0"));
  TinyTokenizerOptions two;
  two.truncation = 2;
  CHECK_THROWS_WITH(oml::data::prepare_tokenizer(tiny_tokenizer(two), 8),
                    Contains("tiny/tokenizer.json: truncation.max_length is 2, which leaves no token of any "
                             "text beside the 2 special tokens") &&
                        Contains("expected at least 3"));
  two.truncation = 3;
  CHECK(oml::data::prepare_tokenizer(tiny_tokenizer(two), 8)->encode("apple", "t").ids.size() == 3);
  // Without a post-processor one token is enough.
  TinyTokenizerOptions bare;
  bare.truncation = 1;
  bare.special_tokens = false;
  CHECK(oml::data::prepare_tokenizer(tiny_tokenizer(bare), 8)->truncation()->max_length == 1);
  // A model that takes no more tokens than the special ones is refused likewise.
  CHECK_THROWS_WITH(oml::data::prepare_tokenizer(tiny_tokenizer(), 2),
                    Contains("tiny/tokenizer.json: the model takes at most 2 tokens"));

  // A TextDataset refuses a tokenizer that was not prepared for its length.
  TextDatasetOptions options;
  options.max_tokens = 4;
  CHECK_THROWS_AS((TextDataset(train_texts({"apple"}), plain, options)), oml::UsageError);
  CHECK_THROWS_WITH(
      (TextDataset(train_texts({"apple"}), std::make_shared<oml::text::Tokenizer>(tiny_tokenizer()),
                   TextDatasetOptions{})),
      Contains("prepare_tokenizer"));
}

TEST_CASE("A text dataset gives each row's tokens and pads a batch to its longest text", "[data][text]") {
  const int64_t cls = oml::test::kTinyCls, sep = oml::test::kTinySep, pad = oml::test::kTinyPad;
  const auto dataset = text_dataset({"The apples", "river", "A very old bridge near the river"});
  CHECK(dataset->size() == 3);
  CHECK(dataset->rows() == 3);
  CHECK(dataset->info(1).label == 1);

  // WordPiece after BERT's normalizer: "apples" is apple ##s; [CLS] ... [SEP] around every text.
  const at::Tensor first = dataset->load(0, {});
  REQUIRE(first.sizes() == torch::IntArrayRef({3, 5}));
  CHECK(values(first[0]) == std::vector<int64_t>{cls, id_of("the"), id_of("apple"), id_of("##s"), sep});
  CHECK(values(first[1]) == std::vector<int64_t>{1, 1, 1, 1, 1});
  CHECK(values(first[2]) == std::vector<int64_t>{0, 0, 0, 0, 0});

  const at::Tensor batch = dataset->collate({dataset->load(0, {}), dataset->load(1, {})}, {0, 1});
  REQUIRE(batch.sizes() == torch::IntArrayRef({2, 3, 5}));
  CHECK(values(batch[1][0]) == std::vector<int64_t>{cls, id_of("river"), sep, pad, pad});
  CHECK(values(batch[1][1]) == std::vector<int64_t>{1, 1, 1, 0, 0});
  CHECK(values(batch[1][2]) == std::vector<int64_t>{0, 0, 0, 0, 0});
  CHECK(torch::equal(batch[0], first));
  // The layout the text encoders take.
  const auto parts = oml::models::unpack_tokens(batch, "test");
  CHECK_NOTHROW(oml::models::check_token_batch(parts, "test"));
  CHECK(torch::equal(parts.attention_mask, batch.select(1, 1)));

  // Another pad id fills the ids of the padding only; a model without token types gets [B, 2, L].
  TextDatasetOptions options;
  options.pad_id = 7;
  options.token_types = false;
  const auto pairs = text_dataset({"The apples", "river"}, options);
  const at::Tensor two_rows = pairs->collate({pairs->load(0, {}), pairs->load(1, {})}, {0, 1});
  REQUIRE(two_rows.sizes() == torch::IntArrayRef({2, 2, 5}));
  CHECK(values(two_rows[1][0]) == std::vector<int64_t>{cls, id_of("river"), sep, 7, 7});
  CHECK(values(two_rows[1][1]) == std::vector<int64_t>{1, 1, 1, 0, 0});
  CHECK_THROWS_WITH(pairs->collate({dataset->load(0, {})}, {0}),
                    Contains("expected the int64 [2, n] tokens"));
}

TEST_CASE("The loader batches texts as images: labels, indices, and padding to each batch's longest",
          "[data][text][loader]") {
  const auto dataset =
      text_dataset({"The apples", "river", "A very old bridge near the river", "dark forest"});
  for (int workers : {0, 2}) {
    INFO("workers " << workers);
    oml::data::LoaderOptions options;
    options.num_workers = workers;
    oml::data::Loader loader(dataset, {{2, 0}, {1, 3}, {1}}, options);
    std::vector<oml::data::LoadedBatch> batches;
    while (auto batch = loader.next()) batches.push_back(std::move(*batch));
    REQUIRE(batches.size() == 3);
    // [CLS] a very old bridge near the river [SEP]: 9 tokens; dark forest: 4; river: 3.
    CHECK(batches[0].images.sizes() == torch::IntArrayRef({2, 3, 9}));
    CHECK(batches[1].images.sizes() == torch::IntArrayRef({2, 3, 4}));
    CHECK(batches[2].images.sizes() == torch::IntArrayRef({1, 3, 3}));
    CHECK(values(batches[0].indices) == std::vector<int64_t>{2, 0});
    CHECK(values(batches[0].labels) == std::vector<int64_t>{2, 0});
    CHECK(values(batches[0].images[1][1]) == std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 0, 0});
    CHECK(batches[0].images.scalar_type() == torch::kInt64);
  }
}

TEST_CASE("Texts are truncated to the model's length with their special tokens kept", "[data][text]") {
  const int64_t cls = oml::test::kTinyCls, sep = oml::test::kTinySep;
  TextDatasetOptions options;
  options.max_tokens = 5;
  const auto dataset = text_dataset({"a very old bridge near the river"}, options);
  CHECK(values(dataset->load(0, {})[0]) ==
        std::vector<int64_t>{cls, id_of("a"), id_of("very"), id_of("old"), sep});
  // The tokenizer.json's own truncation, shorter than the model's, is kept.
  TinyTokenizerOptions file;
  file.truncation = 4;
  options.max_tokens = 32;
  const auto shorter = text_dataset({"a very old bridge"}, options, file);
  CHECK(values(shorter->load(0, {})[0]) == std::vector<int64_t>{cls, id_of("a"), id_of("very"), sep});
  // A text the tokenizer turns into nothing (no special tokens to add) names its row.
  TinyTokenizerOptions vanishing;
  vanishing.special_tokens = false;
  vanishing.removed = "x";
  const auto empty = text_dataset({"apple", "xxx"}, {}, vanishing);
  CHECK(empty->load(0, {}).size(1) == 1);
  CHECK_THROWS_WITH(empty->load(1, {}), Contains("df.csv:3: column 'text'") && Contains("gives no token"));
}

TEST_CASE("Padding a batch does not change a text's embedding", "[data][text][models]") {
  torch::manual_seed(3);
  const auto dataset = text_dataset({"dark forest", "A very old bridge near the river with a red castle"});
  const at::Tensor alone = dataset->collate({dataset->load(0, {})}, {0});
  const at::Tensor padded = dataset->collate({dataset->load(0, {}), dataset->load(1, {})}, {0, 1});
  REQUIRE(padded.size(2) > alone.size(2));
  torch::NoGradGuard no_grad;
  for (const auto pooling :
       {oml::models::TextPooling::cls, oml::models::TextPooling::mean, oml::models::TextPooling::max}) {
    oml::models::TextEncoder model(oml::test::tiny_text_config(), pooling);
    model->eval();
    const at::Tensor a = model->forward(alone);
    const at::Tensor b = model->forward(padded);
    // Masked attention ignores the padding exactly; only the kernels' rounding may differ.
    CHECK(oml::test::max_abs_diff(a[0], b[0]) <= 1e-4);
  }
}

TEST_CASE("hf_text_encoder names its folder's tokenizer.json, the tokens its positions hold and its pad id",
          "[models][text]") {
  oml::cli::register_builtins();
  TempDir dir;
  oml::test::write_tiny_text_model(dir / "model", /*max_position_embeddings=*/24);
  oml::models::TextEncoderOptions options;
  options.model_dir = (dir / "model").string();
  const oml::models::TextEncoder encoder(options);
  const auto spec = oml::models::text_input_of(*encoder);
  REQUIRE(spec.has_value());
  CHECK(spec->tokenizer_file == dir / "model" / "tokenizer.json");
  CHECK(spec->max_tokens == 24);
  CHECK(spec->pad_id == oml::test::kTinyPad);
  CHECK(spec->token_types);

  // Inside extractor_with_mlp: the backbone's.
  const auto doc = oml::config::Document::from_string(
      "mlp: {name: extractor_with_mlp, args: {mlp_features: [8], extractor: {name: hf_text_encoder, args: "
      "{model_dir: " +
          (dir / "model").string() + "}}}}\n",
      "model.yaml");
  const auto mlp =
      oml::registries().extractors.create(oml::config::parse_component(doc.root()["mlp"], "mlp"));
  const auto wrapped = oml::models::text_input_of(*mlp);
  REQUIRE(wrapped.has_value());
  CHECK(wrapped->tokenizer_file == spec->tokenizer_file);
  CHECK(wrapped->max_tokens == 24);
  // An image extractor says nothing.
  CHECK_FALSE(oml::models::text_input_of(*oml::models::ConvNet()).has_value());

  // DistilBERT takes no token types.
  auto distilbert = oml::test::tiny_text_config(24);
  distilbert.model_type = "distilbert";
  distilbert.type_vocab_size = 0;
  oml::models::TextEncoder(distilbert)->save_pretrained(dir / "distilbert");
  options.model_dir = (dir / "distilbert").string();
  const auto distilbert_spec = oml::models::text_input_of(*oml::models::TextEncoder(options));
  REQUIRE(distilbert_spec.has_value());
  CHECK_FALSE(distilbert_spec->token_types);
  CHECK(distilbert_spec->max_tokens == 24);

  // RoBERTa's positions start after the padding id. A model built from a config has no folder,
  // hence no tokenizer to name.
  auto roberta = oml::test::tiny_text_config(24);
  roberta.model_type = "roberta";
  roberta.type_vocab_size = 1;
  roberta.pad_token_id = 1;
  const oml::models::TextEncoder in_code(roberta);
  CHECK(in_code->max_tokens() == 22);
  CHECK_THROWS_AS(in_code->text_input(), oml::UsageError);
}

}  // namespace data_text_tests
