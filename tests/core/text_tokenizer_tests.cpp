// oml::text::Tokenizer's components one at a time, on small inputs whose results were worked out
// by hand (and agree with HF `tokenizers` 0.23), and the errors a bad tokenizer.json or bad text
// gives. The parity with HF on real tokenizers is text_tokenizer_parity_tests.cpp.

#include <string>
#include <utility>
#include <vector>

#include "oml/common/error.h"
#include "oml/text/tokenizer.h"
#include "support/support.h"

namespace text_tokenizer_tests {

namespace {

using Catch::Matchers::Contains;
using oml::text::Offsets;
using oml::text::Tokenizer;
using Pieces = std::vector<std::pair<std::string, Offsets>>;

const char* kWordPieceModel =
    R"({"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
        "max_input_chars_per_word": 100,
        "vocab": {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "aff": 4, "[CLS]": 5, "[SEP]": 6}})";

/// A tokenizer.json with the given sections (JSON text, "null" for none).
std::string tokenizer_json(const std::string& normalizer, const std::string& pre_tokenizer,
                           const std::string& model = kWordPieceModel,
                           const std::string& post_processor = "null",
                           const std::string& added_tokens = "[]") {
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )" + added_tokens +
         R"(, "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "post_processor": )" + post_processor + R"(, "decoder": null, "model": )" + model + "}";
}

std::string normalized(const std::string& normalizer, const std::string& text) {
  return Tokenizer::from_json(tokenizer_json(normalizer, "null"), "test.json").normalize(text, "test");
}

Pieces pre_tokenized(const std::string& pre_tokenizer, const std::string& text) {
  return Tokenizer::from_json(tokenizer_json("null", pre_tokenizer), "test.json").pre_tokenize(text, "test");
}

}  // namespace

TEST_CASE("BertNormalizer cleans, spaces CJK, strips accents and lowercases", "[text][tokenizer]") {
  const std::string bert =
      R"({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true})";
  // \t becomes a space, \0 goes, each ideograph gets a space either side, é loses its accent.
  CHECK(normalized(bert, std::string("H\xC3\xA9llo\tWORLD \xE4\xB8\xAD\xE6\x96\x87\x00!", 21)) ==
        "hello world  \xE4\xB8\xAD  \xE6\x96\x87 !");
  const std::string keep_case =
      R"({"type": "BertNormalizer", "clean_text": false, "handle_chinese_chars": false, "strip_accents": false, "lowercase": false})";
  CHECK(normalized(keep_case, "H\xC3\xA9llo\tW") == "H\xC3\xA9llo\tW");
}

TEST_CASE("The Unicode normalization forms compose and decompose", "[text][tokenizer]") {
  CHECK(normalized(R"({"type": "NFC"})", "e\xCC\x81") == "\xC3\xA9");             // e + U+0301 -> é
  CHECK(normalized(R"({"type": "NFKC"})", "\xEF\xAC\x81\xE2\x91\xA0") == "fi1");  // ﬁ① -> fi1
  CHECK(normalized(R"({"type": "NFD"})", "\xE2\x84\xAB") == "A\xCC\x8A");         // Å (U+212B) -> A + ring
  CHECK(normalized(R"({"type": "NFKD"})", "\xC7\x86") == "dz\xCC\x8C");           // ǆ -> dž decomposed
}

TEST_CASE("Lowercase, StripAccents, Replace, Prepend, Strip and Sequence normalize as HF",
          "[text][tokenizer]") {
  // İ lowercases to i + combining dot above (the full mapping).
  CHECK(normalized(R"({"type": "Lowercase"})",
                   "\xC3\x80"
                   "B \xC4\xB0") ==
        "\xC3\xA0"
        "b i\xCC\x87");
  CHECK(normalized(R"({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}]})",
                   "\xC3\xA9l\xC3\xA8ve") == "eleve");
  CHECK(normalized(R"({"type": "Replace", "pattern": {"String": "  "}, "content": " "})", "a    b") ==
        "a  b");
  CHECK(normalized(R"({"type": "Replace", "pattern": {"Regex": "\\d+"}, "content": "#"})", "a12b3") ==
        "a#b#");
  CHECK(normalized(R"({"type": "Prepend", "prepend": "\u2581"})", "abc") ==
        "\xE2\x96\x81"
        "abc");
  CHECK(normalized(R"({"type": "Prepend", "prepend": "\u2581"})", "") == "");
  CHECK(normalized(R"({"type": "Strip", "strip_left": true, "strip_right": true})", "  abc \t") == "abc");
  CHECK(normalized(R"({"type": "Strip", "strip_left": false, "strip_right": true})", "  abc \t") == "  abc");
}

TEST_CASE("The pre-tokenizers split text and report code point offsets", "[text][tokenizer]") {
  CHECK(pre_tokenized(R"({"type": "BertPreTokenizer"})", "Hello, world!") ==
        Pieces{{"Hello", {0, 5}}, {",", {5, 6}}, {"world", {7, 12}}, {"!", {12, 13}}});
  CHECK(pre_tokenized(R"({"type": "Whitespace"})", "Hey man!  Good?") ==
        Pieces{{"Hey", {0, 3}}, {"man", {4, 7}}, {"!", {7, 8}}, {"Good", {10, 14}}, {"?", {14, 15}}});
  CHECK(pre_tokenized(R"({"type": "WhitespaceSplit"})", "a  b\tc") ==
        Pieces{{"a", {0, 1}}, {"b", {3, 4}}, {"c", {5, 6}}});
  const std::string byte_level =
      R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  // "Ġ" (U+0120) stands for the space byte; the lone space before "go" is a piece of its own.
  CHECK(pre_tokenized(byte_level, "I'll  go 42x") == Pieces{{"I", {0, 1}},
                                                            {"'ll", {1, 4}},
                                                            {"\xC4\xA0", {4, 5}},
                                                            {"\xC4\xA0go", {5, 8}},
                                                            {"\xC4\xA0"
                                                             "42",
                                                             {8, 11}},
                                                            {"x", {11, 12}}});
  // With the prefix space, é's two bytes become two code points ("Ã©"); offsets stay in characters.
  CHECK(pre_tokenized(R"({"type": "ByteLevel", "add_prefix_space": true})", "h\xC3\xA9llo") ==
        Pieces{{"\xC4\xA0h\xC3\x83\xC2\xA9llo", {0, 5}}});
  CHECK(pre_tokenized(
            R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true})",
            "Hey friend") == Pieces{{"\xE2\x96\x81Hey", {0, 3}},
                                    {"\xE2\x96\x81"
                                     "friend",
                                     {3, 10}}});
  CHECK(pre_tokenized(
            R"({"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Isolated", "invert": false})",
            "ab12cd") == Pieces{{"ab", {0, 2}}, {"12", {2, 4}}, {"cd", {4, 6}}});
  CHECK(pre_tokenized(
            R"({"type": "Split", "pattern": {"String": "-"}, "behavior": "Removed", "invert": false})",
            "a-b--c") == Pieces{{"a", {0, 1}}, {"b", {2, 3}}, {"c", {5, 6}}});
  CHECK(pre_tokenized(R"({"type": "Punctuation", "behavior": "Isolated"})", "a.b,") ==
        Pieces{{"a", {0, 1}}, {".", {1, 2}}, {"b", {2, 3}}, {",", {3, 4}}});
  CHECK(pre_tokenized(R"({"type": "Digits", "individual_digits": true})", "a12") ==
        Pieces{{"a", {0, 1}}, {"1", {1, 2}}, {"2", {2, 3}}});
  CHECK(pre_tokenized(R"({"type": "Digits", "individual_digits": false})", "a12") ==
        Pieces{{"a", {0, 1}}, {"12", {1, 3}}});
  CHECK(pre_tokenized(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                                   {"type": "Digits", "individual_digits": true}]})",
                      "ab 12") == Pieces{{"ab", {0, 2}}, {"1", {3, 4}}, {"2", {4, 5}}});
}

TEST_CASE("WordPiece takes the longest vocabulary prefix and falls back to the unknown token",
          "[text][tokenizer]") {
  const auto t = Tokenizer::from_json(tokenizer_json("null", R"({"type": "WhitespaceSplit"})"), "test.json");
  const auto e = t.encode("unaffable xyz", "test");
  CHECK(e.tokens == std::vector<std::string>{"un", "##aff", "##able", "[UNK]"});
  CHECK(e.ids == std::vector<int64_t>{1, 2, 3, 0});
  CHECK(e.offsets == std::vector<Offsets>{{0, 2}, {2, 5}, {5, 9}, {10, 13}});
  CHECK(e.attention_mask == std::vector<int64_t>{1, 1, 1, 1});
}

TEST_CASE("BPE applies its merges by rank", "[text][tokenizer]") {
  const std::string bpe =
      R"({"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}, "merges": [["a", "b"], "ab c"]})";
  const auto e =
      Tokenizer::from_json(tokenizer_json("null", "null", bpe), "test.json").encode("abcab", "test");
  CHECK(e.tokens == std::vector<std::string>{"abc", "ab"});
  CHECK(e.ids == std::vector<int64_t>{4, 3});
  CHECK(e.offsets == std::vector<Offsets>{{0, 3}, {3, 5}});
}

TEST_CASE("Unigram finds the best-scoring segmentation and fuses unknown characters", "[text][tokenizer]") {
  const std::string unigram = R"({"type": "Unigram", "unk_id": 0, "byte_fallback": false,
    "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -1.0], ["ab", -1.5]]})";
  const auto e =
      Tokenizer::from_json(tokenizer_json("null", "null", unigram), "test.json").encode("abxyb", "test");
  // "ab" (-1.5) beats "a" + "b" (-2); "x" and "y" are unknown and fused into one token.
  CHECK(e.tokens == std::vector<std::string>{"ab", "xy", "b"});
  CHECK(e.ids == std::vector<int64_t>{3, 0, 2});
  CHECK(e.offsets == std::vector<Offsets>{{0, 2}, {2, 4}, {4, 5}});
}

TEST_CASE("Byte fallback spells unknown characters as <0xXX> tokens", "[text][tokenizer]") {
  // Unigram: the fused unknown "xy" becomes its two bytes, both covering it; "z" has no byte
  // token, so it stays unknown.
  const std::string unigram = R"({"type": "Unigram", "unk_id": 0, "byte_fallback": true,
    "vocab": [["<unk>", 0.0], ["a", -1.0], ["<0x78>", -5.0], ["<0x79>", -5.0]]})";
  auto e = Tokenizer::from_json(tokenizer_json("null", "null", unigram), "test.json").encode("axyaz", "test");
  CHECK(e.tokens == std::vector<std::string>{"a", "<0x78>", "<0x79>", "a", "z"});
  CHECK(e.ids == std::vector<int64_t>{1, 2, 3, 1, 0});
  CHECK(e.offsets == std::vector<Offsets>{{0, 1}, {1, 3}, {1, 3}, {3, 4}, {4, 5}});
  // BPE: é's two bytes, each covering the character.
  const std::string bpe = R"({"type": "BPE", "unk_token": "<unk>", "byte_fallback": true,
    "vocab": {"<unk>": 0, "a": 1, "<0xC3>": 2, "<0xA9>": 3}, "merges": []})";
  e = Tokenizer::from_json(tokenizer_json("null", "null", bpe), "test.json").encode("a\xC3\xA9z", "test");
  CHECK(e.tokens == std::vector<std::string>{"a", "<0xC3>", "<0xA9>", "<unk>"});
  CHECK(e.ids == std::vector<int64_t>{1, 2, 3, 0});
  CHECK(e.offsets == std::vector<Offsets>{{0, 1}, {1, 2}, {1, 2}, {2, 3}});
}

TEST_CASE("BertProcessing adds [CLS] and [SEP] and gives the pair type id 1", "[text][tokenizer]") {
  const auto t = Tokenizer::from_json(
      tokenizer_json("null", R"({"type": "WhitespaceSplit"})", kWordPieceModel,
                     R"({"type": "BertProcessing", "sep": ["[SEP]", 6], "cls": ["[CLS]", 5]})"),
      "test.json");
  const auto e = t.encode_pair("unaffable", "aff", "test");
  CHECK(e.ids == std::vector<int64_t>{5, 1, 2, 3, 6, 4, 6});
  CHECK(e.type_ids == std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1});
  CHECK(e.special_tokens_mask == std::vector<int64_t>{1, 0, 0, 0, 1, 0, 1});
  CHECK(e.offsets == std::vector<Offsets>{{0, 0}, {0, 2}, {2, 5}, {5, 9}, {0, 0}, {0, 3}, {0, 0}});
  CHECK(t.encode("aff", "test", /*add_special_tokens=*/false).ids == std::vector<int64_t>{4});
}

TEST_CASE("RobertaProcessing separates a pair with two </s> and trims byte-level offsets",
          "[text][tokenizer]") {
  const std::string bpe =
      R"({"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "\u0120": 2, "a": 3, "b": 4, "\u0120a": 5},
                              "merges": [["\u0120", "a"]]})";
  const auto t = Tokenizer::from_json(
      tokenizer_json(
          "null", R"({"type": "ByteLevel", "add_prefix_space": false})", bpe,
          R"({"type": "RobertaProcessing", "sep": ["</s>", 1], "cls": ["<s>", 0], "trim_offsets": true,
                         "add_prefix_space": false})"),
      "test.json");
  const auto e = t.encode_pair("b a", "a", "test");
  CHECK(e.ids == std::vector<int64_t>{0, 4, 5, 1, 1, 3, 1});
  CHECK(e.type_ids == std::vector<int64_t>(7, 0));
  // "Ġa" covers " a" (1, 3); trimming takes its space out.
  CHECK(e.offsets == std::vector<Offsets>{{0, 0}, {0, 1}, {2, 3}, {0, 0}, {0, 0}, {0, 1}, {0, 0}});
}

TEST_CASE("Added tokens are kept whole with their strip, single-word and normalization rules",
          "[text][tokenizer]") {
  const std::string model = R"({"type": "WordPiece", "unk_token": "[UNK]",
    "vocab": {"[UNK]": 0, "a": 1, "b": 2, "[CLS]": 3, "[SEP]": 4}})";
  const std::string added = R"([
    {"id": 5, "content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true},
    {"id": 6, "content": "ent", "single_word": true, "lstrip": false, "rstrip": false, "normalized": true, "special": false},
    {"id": 7, "content": "XY", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}])";
  const auto t = Tokenizer::from_json(
      tokenizer_json(R"({"type": "Lowercase"})", R"({"type": "WhitespaceSplit"})", model, "null", added),
      "test.json");
  auto check = [&](const std::string& text, std::vector<std::string> tokens, std::vector<Offsets> offsets) {
    const auto e = t.encode(text, "test");
    INFO(text);
    CHECK(e.tokens == tokens);
    CHECK(e.offsets == offsets);
  };
  check("a  [MASK]  b", {"a", "  [MASK]  ", "b"},
        {{0, 1}, {1, 11}, {11, 12}});      // lstrip + rstrip take the spaces
  check("a[mask]b", {"[UNK]"}, {{0, 8}});  // not normalized: the lowercase form is not the token
  check("ent a", {"ent", "a"}, {{0, 3}, {4, 5}});
  check("bent ent", {"[UNK]", "ent"}, {{0, 4}, {5, 8}});  // single_word: not inside "bent"
  check("aXYb xy", {"a", "xy", "b", "xy"},
        {{0, 1}, {1, 3}, {3, 4}, {5, 7}});  // normalized: found after Lowercase
  CHECK(t.token_to_id("[MASK]") == 5);
  CHECK(t.vocab_size() == 8);
}

TEST_CASE("Truncation leaves room for the special tokens and padding fills to the length",
          "[text][tokenizer]") {
  const std::string model = R"({"type": "WordPiece", "unk_token": "[UNK]",
    "vocab": {"[UNK]": 0, "a": 1, "b": 2, "[CLS]": 3, "[SEP]": 4}})";
  const std::string post = R"({"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [3], "tokens": ["[CLS]"]},
                       "[SEP]": {"id": "[SEP]", "ids": [4], "tokens": ["[SEP]"]}}})";
  auto t = Tokenizer::from_json(tokenizer_json("null", R"({"type": "WhitespaceSplit"})", model, post),
                                "test.json");
  oml::text::TruncationOptions truncation;
  truncation.max_length = 6;
  oml::text::PaddingOptions padding;
  padding.length = 8;
  padding.pad_token = "[UNK]";
  t.set_truncation(truncation);
  t.set_padding(padding);

  auto e = t.encode("a b a b a b", "test");
  CHECK(e.ids == std::vector<int64_t>{3, 1, 2, 1, 2, 4, 0, 0});
  CHECK(e.attention_mask == std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 0});
  CHECK(e.offsets == std::vector<Offsets>{{0, 0}, {0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 0}, {0, 0}, {0, 0}});
  // Longest first: the pair keeps 2 + 1 of its 6 + 3 tokens.
  e = t.encode_pair("a b a b a b", "b a b", "test");
  CHECK(e.ids == std::vector<int64_t>{3, 1, 2, 4, 2, 4, 0, 0});
  CHECK(e.type_ids == std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0});
  truncation.direction = oml::text::Direction::Left;
  t.set_truncation(truncation);
  CHECK(t.encode("a b a b a b", "test").offsets ==
        std::vector<Offsets>{{0, 0}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {0, 0}, {0, 0}, {0, 0}});

  t.set_truncation(std::nullopt);
  padding.length.reset();  // to the longest of the batch
  padding.pad_to_multiple_of = 4;
  t.set_padding(padding);
  const auto batch = t.encode_batch({"a", "a b a b"}, [](size_t i) { return "item " + std::to_string(i); });
  CHECK(batch[0].ids == std::vector<int64_t>{3, 1, 4, 0, 0, 0, 0, 0});
  CHECK(batch[1].ids == std::vector<int64_t>{3, 1, 2, 1, 2, 4, 0, 0});
}

TEST_CASE("Offsets count code points, not bytes", "[text][tokenizer]") {
  const std::string model =
      R"({"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "\u00e9t\u00e9": 1}})";
  const auto t =
      Tokenizer::from_json(tokenizer_json("null", R"({"type": "WhitespaceSplit"})", model), "test.json");
  // "日本 été": the second word starts at character 3 (byte 7).
  CHECK(t.encode("\xE6\x97\xA5\xE6\x9C\xAC \xC3\xA9t\xC3\xA9", "test").offsets ==
        std::vector<Offsets>{{0, 2}, {3, 6}});
}

TEST_CASE("A tokenizer.json with a component we do not implement is a config error naming it",
          "[text][tokenizer]") {
  auto refused = [](const std::string& json, const std::string& expected) {
    try {
      Tokenizer::from_json(json, "models/tok.json");
      FAIL("accepted: " << json);
    } catch (const oml::ConfigError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("models/tok.json") != std::string::npos);
      CHECK(std::string(e.what()).find(expected) != std::string::npos);
      CHECK(e.exit_code() == 2);
    }
  };
  refused(tokenizer_json(R"({"type": "Frobnicate"})", "null"),
          "normalizer type 'Frobnicate' is not supported");
  refused(tokenizer_json("null", R"({"type": "UnicodeScripts"})"), "pre-tokenizer type 'UnicodeScripts'");
  refused(tokenizer_json("null", "null", R"({"type": "WordLevel", "vocab": {}, "unk_token": "x"})"),
          "model type 'WordLevel' is not supported");
  refused(tokenizer_json("null", "null", kWordPieceModel, R"({"type": "Mystery"})"), "post_processor");
  refused(
      tokenizer_json(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nope"}]})", "null"),
      "normalizer.normalizers[1]");
  refused(tokenizer_json(R"({"type": "Lowercase", "turkish": true})", "null"),
          "option \"turkish\" of Lowercase");
  refused(
      tokenizer_json("null", "null", R"({"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []})"),
      "dropout");
  refused(
      tokenizer_json("null", R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated",
                                     "invert": false})"),
      "regular expression '(unclosed'");
  refused("{not json", "not valid JSON");
  refused(R"({"version": "1.0", "model": null})", "no \"model\"");
  CHECK_THROWS_AS(Tokenizer::from_file("/nonexistent/tokenizer.json"), oml::ConfigError);
}

TEST_CASE("A hostile tokenizer.json: B in the single template, a template that leaves nothing, a sparse id",
          "[text][tokenizer][hostile]") {
  const std::string a_and_b =
      R"([{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}])";
  // A single text has no sequence B: refused when the file is read, naming the piece.
  try {
    Tokenizer::from_json(
        tokenizer_json("null", R"({"type": "WhitespaceSplit"})", kWordPieceModel,
                       R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "B", "type_id": 0}}],
                                            "pair": )" +
                           a_and_b + R"(, "special_tokens": {}})"),
        "models/tok.json");
    FAIL("accepted sequence B in the single template");
  } catch (const oml::ConfigError& e) {
    CHECK_THAT(e.what(),
               Contains("models/tok.json") && Contains("single[0]") && Contains("cannot use sequence B"));
  }
  // A template with no pieces ahead of BertProcessing leaves it no encoding: nothing is added,
  // as HF's BertProcessing maps over none.
  const auto empty = Tokenizer::from_json(tokenizer_json("null", R"({"type": "WhitespaceSplit"})",
                                                         kWordPieceModel,
                                                         R"({"type": "Sequence", "processors": [
                           {"type": "TemplateProcessing", "single": [], "pair": )" +
                                                             a_and_b + R"(, "special_tokens": {}},
                           {"type": "BertProcessing", "sep": ["[SEP]", 6], "cls": ["[CLS]", 5]},
                           {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                            "pair": )" + a_and_b + R"(, "special_tokens": {}}]})"),
                                          "test.json");
  CHECK(empty.encode("aff", "test").ids.empty());
  // BPE ids are HF's u32 and may be sparse: one near 2^32 costs one entry, not a table of 2^32.
  const auto sparse = Tokenizer::from_json(
      tokenizer_json(
          "null", R"({"type": "WhitespaceSplit"})",
          R"({"type": "BPE", "vocab": {"a": 4294967295, "b": 0, "ab": 7}, "merges": [["a", "b"]]})"),
      "test.json");
  const auto e = sparse.encode("a b ab", "test");
  CHECK(e.ids == std::vector<int64_t>{4294967295, 0, 7});
  CHECK(e.tokens == std::vector<std::string>{"a", "b", "ab"});
}

TEST_CASE("Text that is not UTF-8 is a data error naming where it came from", "[text][tokenizer]") {
  const auto t = Tokenizer::from_json(tokenizer_json("null", R"({"type": "WhitespaceSplit"})"), "test.json");
  for (const std::string& bad :
       {std::string("ab\xFF"), std::string("\xC3"), std::string("a\xED\xA0\x80"), std::string("\xC0\xAF")}) {
    try {
      t.encode(bad, "row 17 of df.csv");
      FAIL("accepted invalid UTF-8");
    } catch (const oml::DataError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("row 17 of df.csv") != std::string::npos);
      CHECK(std::string(e.what()).find("not valid UTF-8 (byte ") != std::string::npos);
      CHECK(e.exit_code() == 2);
    }
  }
  try {
    t.encode_batch({"ok", "bad \xFF"},
                   [](size_t i) { return "row " + std::to_string(i + 1) + " of df.csv"; });
    FAIL("accepted invalid UTF-8");
  } catch (const oml::DataError& e) {
    CHECK(std::string(e.what()).find("row 2 of df.csv") != std::string::npos);
  }
}

TEST_CASE("Truncating only the second text of a single text is a data error, as HF refuses it",
          "[text][tokenizer]") {
  auto t = Tokenizer::from_json(tokenizer_json("null", R"({"type": "WhitespaceSplit"})"), "test.json");
  oml::text::TruncationOptions truncation;
  truncation.max_length = 1;
  truncation.strategy = oml::text::TruncationOptions::Strategy::OnlySecond;
  t.set_truncation(truncation);
  CHECK_THROWS_AS(t.encode("un aff", "row 3"), oml::DataError);
  CHECK(t.encode("un", "row 3").ids == std::vector<int64_t>{1});
}

}  // namespace text_tokenizer_tests
