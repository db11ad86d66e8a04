#pragma once
// Text tokenizers read from a Hugging Face `tokenizer.json`, encoding exactly as HF `tokenizers`
// 0.23 does: the same ids, type ids, attention mask, special-tokens mask and offsets
// (docs/text.md lists the supported components; tests/core/text_tokenizer_parity_tests.cpp
// compares with HF on WordPiece, byte-level BPE and Unigram tokenizers).
//
//   auto tokenizer = oml::text::Tokenizer::from_file("bert/tokenizer.json");
//   auto e = tokenizer.encode("Hello, world!", "row 17 of df.csv");
//   // e.ids, e.type_ids, e.attention_mask, e.offsets
//
// Offsets are in Unicode code points (characters) of the original text, [start, end) — what HF's
// Python API reports (Encoding.offsets), not the byte offsets of its Rust `encode`. Special tokens
// added by the post-processor and padding have offsets (0, 0).
//
// Errors: a tokenizer.json that cannot be read, or that uses a component or option this library
// does not implement, is a ConfigError naming the file and the JSON path (never an
// approximation); text that is not valid UTF-8 is a DataError naming the caller's description of
// where the text came from and the byte offset. A Tokenizer is immutable after construction
// except for set_truncation / set_padding; const methods may be called from several threads.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oml::text {

/// [start, end) in code points of the original text.
using Offsets = std::pair<size_t, size_t>;

/// One encoded text or pair of texts (HF's Encoding, less word ids and overflow).
struct Encoding {
  std::vector<int64_t> ids;
  std::vector<int64_t> type_ids;
  std::vector<int64_t> attention_mask;       ///< 1 for tokens, 0 for padding
  std::vector<int64_t> special_tokens_mask;  ///< 1 for tokens the post-processor or padding added
  std::vector<Offsets> offsets;
  std::vector<std::string> tokens;
  size_t size() const { return ids.size(); }
};

enum class Direction { Left, Right };

/// tokenizer.json's "truncation" (HF's TruncationParams).
struct TruncationOptions {
  enum class Strategy { LongestFirst, OnlyFirst, OnlySecond };
  size_t max_length = 512;  ///< including the post-processor's special tokens
  size_t stride = 0;        ///< must be < max_length minus the special tokens (as HF asserts)
  Strategy strategy = Strategy::LongestFirst;
  Direction direction = Direction::Right;
};

/// tokenizer.json's "padding" (HF's PaddingParams).
struct PaddingOptions {
  std::optional<size_t> length;   ///< pad to this many tokens; nullopt: to the longest of the batch
  size_t pad_to_multiple_of = 0;  ///< 0: none
  int64_t pad_id = 0;
  int64_t pad_type_id = 0;
  std::string pad_token = "[PAD]";
  Direction direction = Direction::Right;
};

class Tokenizer {
 public:
  /// Reads `path` (a tokenizer.json as HF `tokenizers` saves it).
  static Tokenizer from_file(const std::string& path);
  /// Parses a tokenizer.json held in memory; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Encodes one text. `where` says where the text came from ("row 17 of df.csv") for errors.
  Encoding encode(std::string_view text, std::string_view where, bool add_special_tokens = true) const;
  /// Encodes a pair of texts (sentence pairs: type ids 0 then 1 for BERT).
  Encoding encode_pair(std::string_view first, std::string_view second, std::string_view where,
                       bool add_special_tokens = true) const;
  /// Encodes several texts; with padding to the longest, all come out as long as the longest
  /// (HF's encode_batch). `where(i)` describes text i for errors.
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts,
                                     const std::function<std::string(size_t)>& where,
                                     bool add_special_tokens = true) const;

  /// Truncation and padding start as the file's "truncation" / "padding" say; nullopt disables.
  const std::optional<TruncationOptions>& truncation() const;
  void set_truncation(std::optional<TruncationOptions> options);
  const std::optional<PaddingOptions>& padding() const;
  void set_padding(std::optional<PaddingOptions> options);

  /// The special tokens the post-processor adds to one text, or to a pair (HF's
  /// num_special_tokens_to_add): truncation keeps this many places for them.
  size_t num_special_tokens_to_add(bool pair) const;

  /// The id of a token of the model's vocabulary or of the added tokens.
  std::optional<int64_t> token_to_id(std::string_view token) const;
  /// The model's vocabulary plus the added tokens that are not in it.
  size_t vocab_size() const;

  /// The normalizer alone (HF's normalizer.normalize_str); the text unchanged when there is none.
  std::string normalize(std::string_view text, std::string_view where) const;
  /// The pre-tokenizer alone on `text` (HF's pre_tokenizer.pre_tokenize_str): the pieces and
  /// their code point offsets in `text`.
  std::vector<std::pair<std::string, Offsets>> pre_tokenize(std::string_view text,
                                                            std::string_view where) const;

  /// The file (or source name) this tokenizer was read from.
  const std::string& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace oml::text
