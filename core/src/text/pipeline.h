#pragma once
// The stages of a tokenizer (normalizer, pre-tokenizer, model, post-processor) and the string
// they pass along, as HF `tokenizers` defines them. Each stage is built from its object in
// tokenizer.json by a make_* function below, which refuses (ConfigError naming the file and the
// JSON path) any type or option it does not implement exactly.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oml/text/tokenizer.h"
#include "text/normalized_string.h"

namespace oml::text::detail {

using Json = nlohmann::json;

/// Where a JSON value sits, for error messages: the file and the path inside it.
struct Place {
  std::string file;
  std::string path;  ///< "normalizer.normalizers[1]"
  Place at(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  Place at(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }
  std::string describe() const { return file + ": " + path; }
};

// Typed reads of a JSON object's fields with errors that name the place.
const Json& field(const Json& object, const char* key, const Place& place);
bool has(const Json& object, const char* key);  ///< present and not null
bool read_bool(const Json& object, const char* key, const Place& place, std::optional<bool> fallback = {});
uint64_t read_uint(const Json& object, const char* key, const Place& place,
                   std::optional<uint64_t> fallback = {});
std::string read_string(const Json& object, const char* key, const Place& place,
                        std::optional<std::string> fallback = {});
/// The "type" of a component object.
std::string read_type(const Json& object, const Place& place);
/// Refuses keys other than `known` (and "type"): an option we would ignore is a different tokenizer.
void only_keys(const Json& object, std::initializer_list<const char*> known, const Place& place);
SplitBehavior read_behavior(const Json& object, const char* key, const Place& place);

struct Token {
  uint32_t id;
  std::string value;
  Range offsets;  ///< bytes of the split's normalized string
};

/// A split of the input on its way through the pipeline; `tokens` once it is final (an added
/// token, or tokenized by the model).
struct Split {
  NormalizedString normalized;
  std::optional<std::vector<Token>> tokens;
};

/// The input cut into splits (HF's PreTokenizedString).
class PreTokenizedString {
 public:
  explicit PreTokenizedString(std::string original);

  /// Replaces each split without tokens by what `fn(split's string)` returns (a vector of Split
  /// or NormalizedString); empty results are dropped.
  template <class Fn>
  void split(Fn fn) {
    std::vector<Split> next;
    next.reserve(splits_.size());
    for (auto& s : splits_) {
      if (s.tokens) {
        next.push_back(std::move(s));
        continue;
      }
      for (auto& piece : fn(std::move(s.normalized))) {
        if constexpr (std::is_same_v<std::decay_t<decltype(piece)>, Split>) {
          if (!piece.normalized.empty()) next.push_back(std::move(piece));
        } else {
          if (!piece.empty()) next.push_back(Split{std::move(piece), std::nullopt});
        }
      }
    }
    splits_ = std::move(next);
  }
  /// Applies `fn(NormalizedString&)` to each split without tokens.
  template <class Fn>
  void normalize(Fn fn) {
    for (auto& s : splits_) {
      if (!s.tokens) fn(s.normalized);
    }
  }

  std::vector<Split>& splits() { return splits_; }
  const std::vector<Split>& splits() const { return splits_; }
  const std::string& original() const { return original_; }

 private:
  std::string original_;
  std::vector<Split> splits_;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedString& s) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(PreTokenizedString& s) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  /// Appends the tokens of one split (offsets in bytes of `text`).
  virtual void tokenize(std::string_view text, std::vector<Token>& out) const = 0;
  virtual std::optional<uint32_t> token_to_id(std::string_view token) const = 0;
  virtual size_t vocab_size() const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  /// Tokens added for a single text or a pair (what truncation leaves room for).
  virtual size_t added_tokens(bool pair) const = 0;
  /// Rewrites the encodings of the text (and of its pair): one or two in, one or two out.
  virtual void process(std::vector<Encoding>& encodings, bool add_special_tokens) const = 0;
};

std::unique_ptr<Normalizer> make_normalizer(const Json& json, const Place& place);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& json, const Place& place);
std::unique_ptr<Model> make_model(const Json& json, const Place& place);
std::unique_ptr<PostProcessor> make_post_processor(const Json& json, const Place& place);

/// Finds the matches of a regular expression (ICU's engine: the Oniguruma expressions
/// tokenizer.json files carry are written in the syntax both share) or of a literal string.
class Pattern {
 public:
  /// `regex` false: `text` is matched literally.
  Pattern(const std::string& text, bool regex, const Place& place);
  ~Pattern();
  Pattern(Pattern&&) noexcept;
  Matches find_matches(std::string_view s) const;

 private:
  std::string literal_;
  struct Compiled;
  std::unique_ptr<Compiled> regex_;
};
/// A Pattern from {"String": "..."} or {"Regex": "..."}.
Pattern read_pattern(const Json& object, const char* key, const Place& place);

/// The GPT-2 byte-to-code-point table the ByteLevel components use: every byte value as a
/// printable code point.
const char32_t* byte_to_char_table();
/// Each byte of `s` replaced by its code point from the table (HF's ByteLevel transformation).
void byte_level_transform(NormalizedString& s);

}  // namespace oml::text::detail
