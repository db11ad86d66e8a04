// The normalizers of tokenizer.json, each doing what HF `tokenizers` 0.23's does to the text and
// to its alignments.

#include <unicode/brkiter.h>
#include <unicode/utext.h>

#include "oml/common/error.h"
#include "text/pipeline.h"
#include "text/unicode.h"

namespace oml::text::detail {
namespace {

/// filter() that skips the (alignment-preserving) identity when nothing is removed.
template <class Keep>
void filter_if_needed(NormalizedString& s, Keep keep) {
  const std::string& text = s.get();
  for (size_t i = 0; i < text.size();) {
    if (!keep(next_char(text, i))) {
      s.filter(keep);
      return;
    }
  }
}

template <class Map>
void map_if_needed(NormalizedString& s, Map map) {
  const std::string& text = s.get();
  for (size_t i = 0; i < text.size();) {
    const char32_t c = next_char(text, i);
    if (map(c) != c) {
      s.map(map);
      return;
    }
  }
}

void apply_form(NormalizedString& s, Form form) {
  if (is_ascii(s.get())) return;  // every form leaves ASCII as it is
  std::vector<std::pair<char32_t, int>> out;
  out.reserve(s.size() + 8);
  normalize_with_changes(s.get(), form, out);
  std::vector<Change> changes;
  changes.reserve(out.size());
  for (const auto& [c, change] : out) changes.push_back({c, change});
  s.transform(changes, 0);
}

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(Form form) : form_(form) {}
  void normalize(NormalizedString& s) const override { apply_form(s, form_); }

 private:
  Form form_;
};

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text), chinese_(chinese), strip_accents_(strip_accents), lowercase_(lowercase) {}

  void normalize(NormalizedString& s) const override {
    if (clean_text_) {
      filter_if_needed(s, [](char32_t c) {
        const bool control = c != '\t' && c != '\n' && c != '\r' && is_other_v8(c);
        return !(c == 0 || c == 0xFFFD || control);
      });
      map_if_needed(s, [](char32_t c) { return is_whitespace(c) ? U' ' : c; });
    }
    if (chinese_) {
      bool any = false;
      const std::string& text = s.get();
      for (size_t i = 0; i < text.size() && !any;) any = is_chinese_char(next_char(text, i));
      if (any) {
        std::vector<Change> changes;
        for (size_t i = 0; i < text.size();) {
          const char32_t c = next_char(text, i);
          if (is_chinese_char(c)) {
            changes.push_back({U' ', 0});
            changes.push_back({c, 1});
            changes.push_back({U' ', 1});
          } else {
            changes.push_back({c, 0});
          }
        }
        s.transform(changes, 0);
      }
    }
    if (strip_accents_) {
      apply_form(s, Form::NFD);
      filter_if_needed(s, [](char32_t c) { return !is_mark_nonspacing_v8(c); });
    }
    if (lowercase_) s.lowercase();
  }

 private:
  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override { s.lowercase(); }
};

class StripAccents : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override {
    filter_if_needed(s, [](char32_t c) { return !is_combining_mark_v9(c); });
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(NormalizedString& s) const override {
    if (left_ && right_) {
      s.strip(true, true);
    } else {
      if (left_) s.strip(true, false);
      if (right_) s.strip(false, true);
    }
  }

 private:
  bool left_, right_;
};

class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(NormalizedString& s) const override { s.replace(pattern_.find_matches(s.get()), content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(NormalizedString& s) const override {
    if (!s.empty()) s.prepend(prefix_);
  }

 private:
  std::string prefix_;
};

class Nmt : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override {
    filter_if_needed(s, [](char32_t c) {
      return !((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F ||
               c == 0x9F);
    });
    map_if_needed(s, [](char32_t c) {
      switch (c) {
        case 0x09:
        case 0x0A:
        case 0x0C:
        case 0x0D:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x2581:
        case 0xFEFF:
        case 0xFFFD:
          return U' ';
        default:
          return (c >= 0x200B && c <= 0x200F) ? U' ' : c;
      }
    });
  }
};

class ByteLevelNormalizer : public Normalizer {
 public:
  void normalize(NormalizedString& s) const override {
    if (!s.empty()) byte_level_transform(s);
  }
};

class NormalizerSequence : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(NormalizedString& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// --- Precompiled: SentencePiece's compiled character map -----------------------------------

std::string decode_base64(const std::string& text, const Place& place) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t buffer = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] != '='; ++i) {
    const int v = value(text[i]);
    OML_CHECK(v >= 0, ConfigError, place.describe(), ": precompiled_charsmap is not base64 (character ", i,
              ")");
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  for (; i < text.size(); ++i) {
    OML_CHECK(text[i] == '=', ConfigError, place.describe(),
              ": precompiled_charsmap is not base64 (character ", i, ")");
  }
  return out;
}

/// The charsmap: a little-endian u32 trie size, the trie (a darts-clone double array over UTF-8
/// bytes whose leaves hold offsets into the normalized blob), then the normalized strings, each
/// ended by a zero byte.
class Precompiled : public Normalizer {
 public:
  Precompiled(const std::string& base64, const Place& place) {
    const std::string blob = decode_base64(base64, place);
    OML_CHECK(blob.size() >= 4, ConfigError, place.describe(), ": precompiled_charsmap is too short");
    const uint32_t trie_bytes = read_u32(blob, 0);
    OML_CHECK(trie_bytes <= blob.size() - 4, ConfigError, place.describe(),
              ": precompiled_charsmap's trie size exceeds the map");
    trie_.resize(trie_bytes / 4);
    for (size_t k = 0; k < trie_.size(); ++k) trie_[k] = read_u32(blob, 4 + 4 * k);
    normalized_ = blob.substr(4 + trie_bytes);
    OML_CHECK(first_invalid_utf8(normalized_) == std::string_view::npos, ConfigError, place.describe(),
              ": precompiled_charsmap's normalized strings are not UTF-8");
    OML_CHECK(!trie_.empty(), ConfigError, place.describe(), ": precompiled_charsmap has an empty trie");
    UErrorCode status = U_ZERO_ERROR;
    graphemes_.reset(icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
    OML_CHECK(U_SUCCESS(status), RuntimeError, "ICU grapheme iterator: ", u_errorName(status));
    place_ = place.describe();
  }

  void normalize(NormalizedString& s) const override {
    // Each extended grapheme cluster shorter than 6 bytes is looked up whole; otherwise (or when
    // it has no entry) each code point is. A replacement is recorded as HF's transformations.
    const std::string& text = s.get();
    if (text.empty()) return;
    std::vector<Change> changes;
    changes.reserve(text.size());
    bool modified = false;
    UErrorCode status = U_ZERO_ERROR;
    UText* utext = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
    std::unique_ptr<icu::BreakIterator> it(graphemes_->clone());
    it->setText(utext, status);
    OML_CHECK(U_SUCCESS(status), RuntimeError, "ICU grapheme iterator: ", u_errorName(status));
    for (int32_t start = it->first(), end = it->next(); end != icu::BreakIterator::DONE;
         start = end, end = it->next()) {
      const std::string_view grapheme(text.data() + start, static_cast<size_t>(end - start));
      if (grapheme.size() < 6) {
        if (const auto norm = lookup(grapheme)) {
          modified = true;
          replace(changes, grapheme, *norm);
          continue;
        }
      }
      for (size_t i = 0; i < grapheme.size();) {
        const size_t from = i;
        const char32_t c = next_char(grapheme, i);
        const std::string_view part = grapheme.substr(from, i - from);
        if (const auto norm = lookup(part)) {
          modified = true;
          replace(changes, part, *norm);
        } else {
          changes.push_back({c, 0});
        }
      }
    }
    it.reset();
    utext_close(utext);
    if (modified) s.transform(changes, 0);
  }

 private:
  static uint32_t read_u32(const std::string& b, size_t at) {
    return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
           static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
           static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
           static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
  }

  uint32_t unit(size_t pos) const {
    OML_CHECK(pos < trie_.size(), ConfigError, place_, ": precompiled_charsmap's trie points outside itself");
    return trie_[pos];
  }

  /// The replacement of the *shortest* key that prefixes `chunk` (what spm_precompiled returns),
  /// or nullopt.
  std::optional<std::string_view> lookup(std::string_view chunk) const {
    auto offset = [](uint32_t u) -> size_t { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    size_t pos = 0;
    uint32_t u = unit(pos);
    pos ^= offset(u);
    for (const char ch : chunk) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == 0) break;
      pos ^= c;
      u = unit(pos);
      if ((u & ((1u << 31) | 0xFF)) != c) return std::nullopt;
      pos ^= offset(u);
      if ((u >> 8) & 1) {
        const size_t index = unit(pos) & ((1u << 31) - 1);
        if (index >= normalized_.size()) return std::string_view();
        const size_t stop = normalized_.find('\0', index);
        return std::string_view(normalized_)
            .substr(index, (stop == std::string::npos ? normalized_.size() : stop) - index);
      }
    }
    return std::nullopt;
  }

  /// HF's bookkeeping for replacing `old_part` by `new_part`: the new code points replace in
  /// order; extra ones are insertions, missing ones are removed with the last code point so far.
  static void replace(std::vector<Change>& changes, std::string_view old_part, std::string_view new_part) {
    const auto old_count = static_cast<long>(count_chars(old_part));
    const auto new_count = static_cast<long>(count_chars(new_part));
    const long diff = new_count - old_count;
    for (size_t i = 0; i < new_part.size();) changes.push_back({next_char(new_part, i), 0});
    if (diff > 0) {
      for (long k = 0; k < diff; ++k) changes[changes.size() - 1 - k].change = 1;
    } else if (diff < 0 && !changes.empty()) {
      changes.back().change += static_cast<int>(diff);
    }
  }

  std::vector<uint32_t> trie_;
  std::string normalized_;
  std::unique_ptr<icu::BreakIterator> graphemes_;
  std::string place_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& json, const Place& place) {
  const std::string type = read_type(json, place);
  if (type == "BertNormalizer") {
    only_keys(json, {"clean_text", "handle_chinese_chars", "strip_accents", "lowercase"}, place);
    const bool lowercase = read_bool(json, "lowercase", place, true);
    const bool strip = has(json, "strip_accents") ? read_bool(json, "strip_accents", place) : lowercase;
    return std::make_unique<BertNormalizer>(read_bool(json, "clean_text", place, true),
                                            read_bool(json, "handle_chinese_chars", place, true), strip,
                                            lowercase);
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    only_keys(json, {}, place);
    const Form form = type == "NFC"    ? Form::NFC
                      : type == "NFD"  ? Form::NFD
                      : type == "NFKC" ? Form::NFKC
                                       : Form::NFKD;
    return std::make_unique<UnicodeForm>(form);
  }
  if (type == "Lowercase") {
    only_keys(json, {}, place);
    return std::make_unique<Lowercase>();
  }
  if (type == "StripAccents") {
    only_keys(json, {}, place);
    return std::make_unique<StripAccents>();
  }
  if (type == "Strip") {
    only_keys(json, {"strip_left", "strip_right"}, place);
    return std::make_unique<Strip>(read_bool(json, "strip_left", place),
                                   read_bool(json, "strip_right", place));
  }
  if (type == "Replace") {
    only_keys(json, {"pattern", "content"}, place);
    return std::make_unique<Replace>(read_pattern(json, "pattern", place),
                                     read_string(json, "content", place));
  }
  if (type == "Prepend") {
    only_keys(json, {"prepend"}, place);
    return std::make_unique<Prepend>(read_string(json, "prepend", place));
  }
  if (type == "Nmt") {
    only_keys(json, {}, place);
    return std::make_unique<Nmt>();
  }
  if (type == "ByteLevel") {
    only_keys(json, {}, place);
    return std::make_unique<ByteLevelNormalizer>();
  }
  if (type == "Precompiled") {
    only_keys(json, {"precompiled_charsmap"}, place);
    return std::make_unique<Precompiled>(read_string(json, "precompiled_charsmap", place), place);
  }
  if (type == "Sequence") {
    only_keys(json, {"normalizers"}, place);
    const Json& list = field(json, "normalizers", place);
    OML_CHECK(list.is_array(), ConfigError, place.at("normalizers").describe(), ": expected a list");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i)
      parts.push_back(make_normalizer(list[i], place.at("normalizers").at(i)));
    return std::make_unique<NormalizerSequence>(std::move(parts));
  }
  throw ConfigError(
      place.describe() + ": normalizer type '" + type +
      "' is not supported (supported: BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, "
      "Strip, Replace, Prepend, Nmt, ByteLevel, Precompiled, Sequence)");
}

}  // namespace oml::text::detail
