// oml::text::Tokenizer against HF `tokenizers` 0.23 (the test venv): tests/python/
// tokenizers_reference.py trains a WordPiece (BERT), a byte-level BPE (RoBERTa) and a Unigram
// (XLM-R, with SentencePiece's nmt_nfkc character map) tokenizer on text every Debian machine has
// plus generated lines (CJK, combining accents, emoji, control characters, very long words,
// whitespace runs, empty lines, added tokens), and writes what HF encodes for 10,000 lines, 2,000
// pairs, 500 lines without special tokens, 3,000 lines and pairs under two truncation and padding
// settings (as the file's sections and as set by a caller) and 30 padded batches. Every id, type
// id, attention mask, special-tokens mask and offset must be equal.

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "oml/common/error.h"
#include "oml/text/tokenizer.h"
#include "support/support.h"

namespace text_tokenizer_parity_tests {

namespace {

using nlohmann::json;
using oml::text::Direction;
using oml::text::Encoding;
using oml::text::PaddingOptions;
using oml::text::Tokenizer;
using oml::text::TruncationOptions;

/// The reference script's folder for `kind` (read-only).
const std::filesystem::path& reference(const std::string& kind) {
  return oml::test::reference_export("tokenizers_reference.py", kind);
}

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

Direction direction(const json& j) {
  return j.get<std::string>() == "left" ? Direction::Left : Direction::Right;
}

TruncationOptions truncation(const json& j) {
  TruncationOptions t;
  t.max_length = j["max_length"].get<size_t>();
  t.stride = j["stride"].get<size_t>();
  const std::string s = j["strategy"].get<std::string>();
  t.strategy = s == "only_first"    ? TruncationOptions::Strategy::OnlyFirst
               : s == "only_second" ? TruncationOptions::Strategy::OnlySecond
                                    : TruncationOptions::Strategy::LongestFirst;
  t.direction = direction(j["direction"]);
  return t;
}

PaddingOptions padding(const json& j) {
  PaddingOptions p;
  if (!j["length"].is_null()) p.length = j["length"].get<size_t>();
  if (!j["pad_to_multiple_of"].is_null()) p.pad_to_multiple_of = j["pad_to_multiple_of"].get<size_t>();
  p.pad_id = j["pad_id"].get<int64_t>();
  p.pad_type_id = j["pad_type_id"].get<int64_t>();
  p.pad_token = j["pad_token"].get<std::string>();
  p.direction = direction(j["direction"]);
  return p;
}

/// Empty when `got` is what HF encoded, else what differs.
std::string difference(const Encoding& got, const json& want) {
  std::vector<std::vector<int64_t>> offsets;
  for (const auto& [start, end] : got.offsets)
    offsets.push_back({static_cast<int64_t>(start), static_cast<int64_t>(end)});
  const std::vector<std::pair<const char*, json>> fields = {{"ids", got.ids},
                                                            {"type_ids", got.type_ids},
                                                            {"attention_mask", got.attention_mask},
                                                            {"special_tokens_mask", got.special_tokens_mask},
                                                            {"offsets", offsets}};
  for (const auto& [name, value] : fields) {
    if (value != want[name]) return std::string(name) + ": got " + value.dump() + ", HF " + want[name].dump();
  }
  return "";
}

/// Counts the cases that differ from HF, keeping the first few as messages.
struct Tally {
  size_t checked = 0, differing = 0;
  std::ostringstream first;
  void add(const std::string& what, const std::string& diff) {
    ++checked;
    if (diff.empty()) return;
    if (++differing <= 5) first << what << "\n  " << diff.substr(0, 600) << "\n";
  }
};

void check_parity(const std::string& kind) {
  const auto& dir = reference(kind);
  const json expected = read_json(dir / (kind + ".expected.json"));
  const Tokenizer plain = Tokenizer::from_file((dir / (kind + ".tokenizer.json")).string());
  const Tokenizer from_file = Tokenizer::from_file((dir / (kind + ".truncated.tokenizer.json")).string());
  REQUIRE(from_file.truncation().has_value());
  REQUIRE(from_file.padding().has_value());

  // The caller's settings on the plain tokenizer, one copy per setting.
  std::map<std::string, Tokenizer> configured;
  for (const auto& [name, s] : expected["settings"].items()) {
    Tokenizer t = Tokenizer::from_file((dir / (kind + ".tokenizer.json")).string());
    t.set_truncation(truncation(s["truncation"]));
    t.set_padding(padding(s["padding"]));
    configured.emplace(name, std::move(t));
  }

  Tally tally;
  size_t singles = 0, pairs = 0;
  for (const json& c : expected["cases"]) {
    const std::string settings = c["settings"].get<std::string>();
    const bool special = c.value("add_special_tokens", true);
    const std::string text = c["text"].get<std::string>();
    std::vector<const Tokenizer*> tokenizers{&plain};
    if (settings != "plain") tokenizers = {&configured.at(settings)};
    if (settings == "truncated") tokenizers.push_back(&from_file);
    for (const Tokenizer* t : tokenizers) {
      const std::string what = kind + " [" + settings + (t == &from_file ? ", from the file" : "") + "] " +
                               json(text).dump() + (c.contains("pair") ? " + " + c["pair"].dump() : "");
      std::string diff;
      try {
        const Encoding e = c.contains("pair")
                               ? t->encode_pair(text, c["pair"].get<std::string>(), "case", special)
                               : t->encode(text, "case", special);
        diff = c.contains("error") ? "HF refused (" + c["error"].get<std::string>() + "), we encoded"
                                   : difference(e, c);
      } catch (const oml::DataError& e) {
        if (!c.contains("error")) diff = std::string("we refused: ") + e.what();
      }
      tally.add(what, diff);
    }
    (c.contains("pair") ? pairs : singles) += 1;
  }

  Tokenizer batched = Tokenizer::from_file((dir / (kind + ".tokenizer.json")).string());
  PaddingOptions batch_padding;
  batch_padding.pad_id = expected["batch_padding"]["pad_id"].get<int64_t>();
  batch_padding.pad_token = expected["batch_padding"]["pad_token"].get<std::string>();
  batch_padding.pad_to_multiple_of = expected["batch_padding"]["pad_to_multiple_of"].get<size_t>();
  batched.set_padding(batch_padding);
  for (const json& b : expected["batches"]) {
    const auto texts = b["texts"].get<std::vector<std::string>>();
    const auto got = batched.encode_batch(texts, [](size_t i) { return "batch item " + std::to_string(i); });
    REQUIRE(got.size() == texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      tally.add(kind + " [batch] " + json(texts[i]).dump(), difference(got[i], b["encodings"][i]));
    }
  }

  INFO(tally.differing << " of " << tally.checked << " encodings differ from HF; the first:\n"
                       << tally.first.str());
  CHECK(singles >= 10000);
  CHECK(pairs >= 2000);
  CHECK(tally.checked >= 20000);
  CHECK(tally.differing == 0);
}

}  // namespace

TEST_CASE("A BERT WordPiece tokenizer encodes as HF tokenizers does", "[text][tokenizer][python]") {
  check_parity("wordpiece");
}

TEST_CASE("A RoBERTa byte-level BPE tokenizer encodes as HF tokenizers does", "[text][tokenizer][python]") {
  check_parity("bpe");
}

TEST_CASE("An XLM-R Unigram tokenizer with a precompiled charsmap encodes as HF tokenizers does",
          "[text][tokenizer][python]") {
  check_parity("unigram");
}

}  // namespace text_tokenizer_parity_tests
