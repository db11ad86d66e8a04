#include "oml/text/tokenizer.h"

#include <fstream>
#include <sstream>

#include "oml/common/error.h"
#include "text/added_vocabulary.h"
#include "text/pipeline.h"
#include "text/unicode.h"

namespace oml::text {

using namespace detail;

struct Tokenizer::Impl {
  std::string source;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  AddedVocabulary added;
  std::optional<TruncationOptions> truncation;
  std::optional<PaddingOptions> padding;

  /// One text (of a pair when `pair`) through the pipeline up to the model.
  Encoding encode_one(std::string_view text, int64_t type_id, bool pair, std::string_view where) const;
  Encoding post_process(Encoding a, std::optional<Encoding> b, bool add_special_tokens,
                        std::string_view where) const;
};

namespace {

void check_utf8(std::string_view text, std::string_view where) {
  const size_t bad = first_invalid_utf8(text);
  OML_CHECK(bad == std::string_view::npos, DataError, where, ": the text is not valid UTF-8 (byte ", bad,
            " of ", text.size(), ")");
}

Direction read_direction(const Json& json, const char* key, const Place& place) {
  const std::string d = read_string(json, key, place, std::string("Right"));
  if (d == "Right") return Direction::Right;
  if (d == "Left") return Direction::Left;
  throw ConfigError(place.at(key).describe() + ": expected Left or Right, got '" + d + "'");
}

TruncationOptions read_truncation(const Json& json, const Place& place) {
  only_keys(json, {"direction", "max_length", "strategy", "stride"}, place);
  TruncationOptions t;
  t.max_length = read_uint(json, "max_length", place);
  t.stride = read_uint(json, "stride", place, 0);
  t.direction = read_direction(json, "direction", place);
  const std::string s = read_string(json, "strategy", place, std::string("LongestFirst"));
  if (s == "LongestFirst") {
    t.strategy = TruncationOptions::Strategy::LongestFirst;
  } else if (s == "OnlyFirst") {
    t.strategy = TruncationOptions::Strategy::OnlyFirst;
  } else if (s == "OnlySecond") {
    t.strategy = TruncationOptions::Strategy::OnlySecond;
  } else {
    throw ConfigError(place.at("strategy").describe() +
                      ": expected LongestFirst, OnlyFirst or OnlySecond, got '" + s + "'");
  }
  return t;
}

PaddingOptions read_padding(const Json& json, const Place& place) {
  only_keys(json, {"strategy", "direction", "pad_to_multiple_of", "pad_id", "pad_type_id", "pad_token"},
            place);
  PaddingOptions p;
  const Json& strategy = field(json, "strategy", place);
  if (strategy.is_object() && strategy.size() == 1 && strategy.contains("Fixed")) {
    p.length = read_uint(strategy, "Fixed", place.at("strategy"));
  } else {
    OML_CHECK(strategy == "BatchLongest", ConfigError, place.at("strategy").describe(),
              ": expected \"BatchLongest\" or {\"Fixed\": n}, got ", strategy.dump());
  }
  p.direction = read_direction(json, "direction", place);
  p.pad_to_multiple_of = read_uint(json, "pad_to_multiple_of", place, 0);
  p.pad_id = static_cast<int64_t>(read_uint(json, "pad_id", place, 0));
  p.pad_type_id = static_cast<int64_t>(read_uint(json, "pad_type_id", place, 0));
  p.pad_token = read_string(json, "pad_token", place, std::string("[PAD]"));
  return p;
}

std::vector<AddedToken> read_added_tokens(const Json& json, const Place& place) {
  OML_CHECK(json.is_array(), ConfigError, place.describe(), ": expected a list");
  std::vector<AddedToken> tokens;
  for (size_t i = 0; i < json.size(); ++i) {
    const Place at = place.at(i);
    only_keys(json[i], {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}, at);
    AddedToken t;
    t.content = read_string(json[i], "content", at);
    t.special = read_bool(json[i], "special", at, false);
    t.single_word = read_bool(json[i], "single_word", at, false);
    t.lstrip = read_bool(json[i], "lstrip", at, false);
    t.rstrip = read_bool(json[i], "rstrip", at, false);
    t.normalized = read_bool(json[i], "normalized", at, !t.special);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

/// Byte offsets in `text` to code point offsets, as HF's BytesToCharOffsetConverter: an end at
/// the text's end maps past the last code point; a start it has no entry for stays as it was.
class CharOffsets {
 public:
  explicit CharOffsets(std::string_view text) : size_(text.size()), ascii_(is_ascii(text)) {
    if (ascii_) return;
    index_.resize(text.size());
    uint32_t n = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && i > 0) ++n;
      index_[i] = n;
    }
  }
  Range convert(Range o) const {
    if (ascii_ || o.first >= size_) return o;
    const size_t start = index_[o.first];
    if (o.second < size_) return {start, index_[o.second]};
    return {start, (o.second >= 1 && o.second - 1 < size_ ? index_[o.second - 1] : start) + 1};
  }

 private:
  size_t size_;
  bool ascii_;
  std::vector<uint32_t> index_;
};

/// Keeps the tokens of the splits up to the one that reaches `max_tokens` from the chosen end
/// (HF tokenizes no further: what truncation will cut anyway).
void tokenize_with_limit(PreTokenizedString& s, const Model& model, std::optional<size_t> max_tokens,
                         Direction direction) {
  auto& splits = s.splits();
  auto tokenize = [&](Split& split) {
    split.tokens.emplace();
    model.tokenize(split.normalized.get(), *split.tokens);
  };
  if (!max_tokens) {
    for (auto& split : splits) {
      if (!split.tokens) tokenize(split);
    }
    return;
  }
  // From the end truncation keeps, up to and including the split that reaches max_tokens.
  const size_t n = splits.size();
  size_t total = 0, visited = 0;
  while (visited < n) {
    Split& split = splits[direction == Direction::Right ? visited : n - 1 - visited];
    ++visited;
    const bool fresh = !split.tokens;
    if (fresh) tokenize(split);
    total += split.tokens->size();
    if (fresh && total >= *max_tokens) break;
  }
  if (direction == Direction::Right) {
    splits.resize(visited);
  } else {
    splits.erase(splits.begin(), splits.begin() + static_cast<std::ptrdiff_t>(n - visited));
  }
}

void truncate(Encoding& e, size_t max_len, size_t stride, Direction direction, std::string_view where) {
  if (max_len >= e.size()) return;
  OML_CHECK(max_len == 0 || stride < max_len, ConfigError, where, ": truncation stride ", stride,
            " must be less than the length it truncates to (", max_len,
            ", max_length less the special tokens)");
  const size_t from = direction == Direction::Right ? 0 : e.size() - max_len;
  auto cut = [&](auto& v) {
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(from + max_len), v.end());
    v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(from));
  };
  cut(e.ids);
  cut(e.type_ids);
  cut(e.attention_mask);
  cut(e.special_tokens_mask);
  cut(e.offsets);
  cut(e.tokens);
}

/// HF's truncate_encodings.
void truncate_pair(Encoding& a, std::optional<Encoding>& b, const TruncationOptions& t,
                   std::string_view where) {
  using Strategy = TruncationOptions::Strategy;
  if (t.max_length == 0) {
    truncate(a, 0, t.stride, t.direction, where);
    if (b) truncate(*b, 0, t.stride, t.direction, where);
    return;
  }
  const size_t total = a.size() + (b ? b->size() : 0);
  if (total <= t.max_length) return;
  const size_t to_remove = total - t.max_length;
  if (t.strategy == Strategy::LongestFirst) {
    if (!b) {
      truncate(a, total - to_remove, t.stride, t.direction, where);
      return;
    }
    size_t n1 = a.size(), n2 = b->size();
    const bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > t.max_length ? n1 : std::max(n1, t.max_length - n1);
    if (n1 + n2 > t.max_length) {
      n1 = t.max_length / 2;
      n2 = n1 + t.max_length % 2;
    }
    if (swap) std::swap(n1, n2);
    truncate(a, n1, t.stride, t.direction, where);
    truncate(*b, n2, t.stride, t.direction, where);
    return;
  }
  OML_CHECK(t.strategy == Strategy::OnlyFirst || b, DataError, where,
            ": truncation strategy OnlySecond needs a pair of texts, and this single text is too long");
  Encoding& target = t.strategy == Strategy::OnlyFirst ? a : *b;
  OML_CHECK(target.size() > to_remove, DataError, where, ": the ",
            t.strategy == Strategy::OnlyFirst ? "first" : "second", " text (", target.size(),
            " tokens) is too short to truncate the pair to ", t.max_length, " tokens");
  truncate(target, target.size() - to_remove, t.stride, t.direction, where);
}

void pad(Encoding& e, size_t length, const PaddingOptions& p) {
  if (e.size() >= length) return;
  const size_t n = length - e.size();
  const auto at = [&](auto& v) { return p.direction == Direction::Right ? v.end() : v.begin(); };
  e.ids.insert(at(e.ids), n, p.pad_id);
  e.type_ids.insert(at(e.type_ids), n, p.pad_type_id);
  e.attention_mask.insert(at(e.attention_mask), n, 0);
  e.special_tokens_mask.insert(at(e.special_tokens_mask), n, 1);
  e.offsets.insert(at(e.offsets), n, Offsets{0, 0});
  e.tokens.insert(at(e.tokens), n, p.pad_token);
}

size_t padded_length(size_t longest, const PaddingOptions& p) {
  size_t length = p.length.value_or(longest);
  if (p.pad_to_multiple_of > 0 && length % p.pad_to_multiple_of > 0) {
    length += p.pad_to_multiple_of - length % p.pad_to_multiple_of;
  }
  return length;
}

void append(Encoding& to, Encoding&& from) {
  to.ids.insert(to.ids.end(), from.ids.begin(), from.ids.end());
  to.type_ids.insert(to.type_ids.end(), from.type_ids.begin(), from.type_ids.end());
  to.attention_mask.insert(to.attention_mask.end(), from.attention_mask.begin(), from.attention_mask.end());
  to.special_tokens_mask.insert(to.special_tokens_mask.end(), from.special_tokens_mask.begin(),
                                from.special_tokens_mask.end());
  to.offsets.insert(to.offsets.end(), from.offsets.begin(), from.offsets.end());
  for (auto& t : from.tokens) to.tokens.push_back(std::move(t));
}

}  // namespace

Encoding Tokenizer::Impl::encode_one(std::string_view text, int64_t type_id, bool pair,
                                     std::string_view where) const {
  check_utf8(text, where);
  PreTokenizedString pieces = added.extract_and_normalize(normalizer.get(), std::string(text));
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
  // A single text stops being tokenized once it has max_length tokens: truncation keeps fewer, so
  // this only saves work. A pair's texts are tokenized whole, as HF 0.23.3 does (measured: which
  // text of a pair is the longer, and so keeps the odd token, is decided on their full lengths).
  std::optional<size_t> limit;
  if (truncation && !pair && truncation->strategy != TruncationOptions::Strategy::OnlySecond) {
    limit = truncation->max_length;
  }
  tokenize_with_limit(pieces, *model, limit, truncation ? truncation->direction : Direction::Right);

  const CharOffsets chars(pieces.original());
  Encoding e;
  for (const Split& split : pieces.splits()) {
    const size_t shift = split.normalized.offsets_original().first;
    for (const Token& token : *split.tokens) {
      Range o = token.offsets;
      if (const auto r = split.normalized.normalized_to_original(token.offsets))
        o = {shift + r->first, shift + r->second};
      e.offsets.push_back(chars.convert(o));
      e.ids.push_back(token.id);
      e.tokens.push_back(token.value);
    }
  }
  e.type_ids.assign(e.ids.size(), type_id);
  e.attention_mask.assign(e.ids.size(), 1);
  e.special_tokens_mask.assign(e.ids.size(), 0);
  return e;
}

Encoding Tokenizer::Impl::post_process(Encoding a, std::optional<Encoding> b, bool add_special_tokens,
                                       std::string_view where) const {
  if (truncation) {
    TruncationOptions t = *truncation;
    const size_t added_tokens = post_processor ? post_processor->added_tokens(b.has_value()) : 0;
    if (add_special_tokens && added_tokens > 0) {
      OML_CHECK(t.max_length >= added_tokens, ConfigError, source, ": truncation max_length ", t.max_length,
                " is less than the ", added_tokens, " special tokens the post-processor adds");
      t.max_length -= added_tokens;
    }
    truncate_pair(a, b, t, where);
  }
  Encoding result;
  if (post_processor) {
    std::vector<Encoding> parts;
    parts.push_back(std::move(a));
    if (b) parts.push_back(std::move(*b));
    for (size_t i = 0; i < parts.size(); ++i)
      parts[i].type_ids.assign(parts[i].size(), static_cast<int64_t>(i));
    post_processor->process(parts, add_special_tokens);
    for (auto& p : parts) append(result, std::move(p));
  } else {
    result = std::move(a);
    if (b) append(result, std::move(*b));
  }
  if (padding) pad(result, padded_length(result.size(), *padding), *padding);
  return result;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  OML_CHECK(in.good(), ConfigError, path, ": cannot open the tokenizer file");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json(text.str(), path);
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  Json json;
  try {
    json = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    throw ConfigError(source + ": not valid JSON (" + e.what() + ")");
  }
  const Place root{source, ""};
  OML_CHECK(json.is_object(), ConfigError, source, ": expected a JSON object (a tokenizer.json)");
  if (has(json, "version")) {
    const std::string version = read_string(json, "version", root);
    OML_CHECK(version == "1.0", ConfigError, source, ": unknown tokenizer version '", version,
              "' (expected 1.0)");
  }
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  OML_CHECK(has(json, "model"), ConfigError, source, ": no \"model\" (is this a tokenizer.json?)");
  impl->model = make_model(json["model"], root.at("model"));
  if (has(json, "normalizer")) impl->normalizer = make_normalizer(json["normalizer"], root.at("normalizer"));
  if (has(json, "pre_tokenizer"))
    impl->pre_tokenizer = make_pre_tokenizer(json["pre_tokenizer"], root.at("pre_tokenizer"));
  if (has(json, "post_processor")) {
    impl->post_processor = make_post_processor(json["post_processor"], root.at("post_processor"));
  }
  if (has(json, "truncation")) impl->truncation = read_truncation(json["truncation"], root.at("truncation"));
  if (has(json, "padding")) impl->padding = read_padding(json["padding"], root.at("padding"));
  if (has(json, "added_tokens")) {
    impl->added.add(read_added_tokens(json["added_tokens"], root.at("added_tokens")), *impl->model,
                    impl->normalizer.get(), root.at("added_tokens"));
  }
  return Tokenizer(std::move(impl));
}

Encoding Tokenizer::encode(std::string_view text, std::string_view where, bool add_special_tokens) const {
  return impl_->post_process(impl_->encode_one(text, 0, false, where), std::nullopt, add_special_tokens,
                             where);
}

Encoding Tokenizer::encode_pair(std::string_view first, std::string_view second, std::string_view where,
                                bool add_special_tokens) const {
  Encoding a = impl_->encode_one(first, 0, true, where);
  Encoding b = impl_->encode_one(second, 1, true, where);
  return impl_->post_process(std::move(a), std::move(b), add_special_tokens, where);
}

std::vector<Encoding> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                              const std::function<std::string(size_t)>& where,
                                              bool add_special_tokens) const {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  size_t longest = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    // The description is only built when an error needs it.
    try {
      out.push_back(encode(texts[i], "", add_special_tokens));
    } catch (const DataError& e) {
      throw DataError(where(i) + e.what());
    }
    longest = std::max(longest, out.back().size());
  }
  if (impl_->padding) {
    const size_t length = padded_length(longest, *impl_->padding);
    for (auto& e : out) pad(e, length, *impl_->padding);
  }
  return out;
}

const std::optional<TruncationOptions>& Tokenizer::truncation() const { return impl_->truncation; }
void Tokenizer::set_truncation(std::optional<TruncationOptions> options) {
  impl_->truncation = std::move(options);
}
const std::optional<PaddingOptions>& Tokenizer::padding() const { return impl_->padding; }
void Tokenizer::set_padding(std::optional<PaddingOptions> options) { impl_->padding = std::move(options); }

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added.token_to_id(token)) return *id;
  if (const auto id = impl_->model->token_to_id(token)) return *id;
  return std::nullopt;
}

size_t Tokenizer::num_special_tokens_to_add(bool pair) const {
  return impl_->post_processor ? impl_->post_processor->added_tokens(pair) : 0;
}

size_t Tokenizer::vocab_size() const {
  return impl_->model->vocab_size() + impl_->added.count_outside(*impl_->model);
}

std::string Tokenizer::normalize(std::string_view text, std::string_view where) const {
  check_utf8(text, where);
  NormalizedString s{std::string(text)};
  if (impl_->normalizer) impl_->normalizer->normalize(s);
  return s.get();
}

std::vector<std::pair<std::string, Offsets>> Tokenizer::pre_tokenize(std::string_view text,
                                                                     std::string_view where) const {
  check_utf8(text, where);
  PreTokenizedString pieces{std::string(text)};
  if (impl_->pre_tokenizer) impl_->pre_tokenizer->pre_tokenize(pieces);
  const CharOffsets chars(text);
  std::vector<std::pair<std::string, Offsets>> out;
  for (const Split& s : pieces.splits())
    out.emplace_back(s.normalized.get(), chars.convert(s.normalized.offsets_original()));
  return out;
}

const std::string& Tokenizer::source() const { return impl_->source; }

}  // namespace oml::text
