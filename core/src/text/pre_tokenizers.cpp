// The pre-tokenizers of tokenizer.json, each splitting as HF `tokenizers` 0.23's does.

#include "oml/common/error.h"
#include "text/pipeline.h"
#include "text/unicode.h"

namespace oml::text::detail {
namespace {

template <class Predicate>
std::vector<NormalizedString> split_on(const NormalizedString& s, Predicate p, SplitBehavior behavior) {
  return s.split(find_char_matches(s.get(), p), behavior);
}

class BertPreTokenizer : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([](NormalizedString&& n) { return split_on(n, is_whitespace, SplitBehavior::Removed); });
    s.split([](NormalizedString&& n) { return split_on(n, is_bert_punctuation, SplitBehavior::Isolated); });
  }
};

class WhitespaceSplit : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([](NormalizedString&& n) { return split_on(n, is_whitespace, SplitBehavior::Removed); });
  }
};

class Punctuation : public PreTokenizer {
 public:
  explicit Punctuation(SplitBehavior behavior) : behavior_(behavior) {}
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([&](NormalizedString&& n) { return split_on(n, is_bert_punctuation, behavior_); });
  }

 private:
  SplitBehavior behavior_;
};

class Digits : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void pre_tokenize(PreTokenizedString& s) const override {
    const auto behavior = individual_ ? SplitBehavior::Isolated : SplitBehavior::Contiguous;
    s.split([&](NormalizedString&& n) { return split_on(n, is_numeric, behavior); });
  }

 private:
  bool individual_;
};

/// `\w+|[^\w\s]+` (Rust regex), the pieces kept and the whitespace between them removed.
class Whitespace : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([](NormalizedString&& n) {
      const std::string& text = n.get();
      Matches matches;  // already inverted: the expression's matches are the kept pieces
      if (text.empty()) matches.push_back({{0, 0}, true});
      size_t previous = 0;
      for (size_t i = 0; i < text.size();) {
        size_t j = i;
        const char32_t c = next_char(text, j);
        const bool word = is_regex_word(c);
        if (!word && is_whitespace(c)) {
          i = j;
          continue;
        }
        size_t end = j;
        for (size_t k = j; k < text.size();) {
          const char32_t d = next_char(text, k);
          if (word ? !is_regex_word(d) : (is_regex_word(d) || is_whitespace(d))) break;
          end = k;
        }
        if (previous != i) matches.push_back({{previous, i}, true});
        matches.push_back({{i, end}, false});
        previous = i = end;
      }
      if (!text.empty() && previous != text.size()) matches.push_back({{previous, text.size()}, true});
      return n.split(std::move(matches), SplitBehavior::Removed);
    });
  }
};

/// The GPT-2 expression
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// as Oniguruma runs it (alternatives in order, leftmost match), written out: it is the hot loop
/// of every byte-level BPE tokenizer.
Matches gpt2_matches(std::string_view s) {
  Matches matches;
  if (s.empty()) {
    matches.push_back({{0, 0}, false});
    return matches;
  }
  const size_t n = s.size();
  auto char_at = [&](size_t i, size_t& next) {
    next = i;
    return next_char(s, next);
  };
  auto run = [&](size_t from, auto in_class) {  // end of the run of in_class code points from `from`
    size_t end = from;
    while (end < n) {
      size_t next;
      if (!in_class(char_at(end, next))) break;
      end = next;
    }
    return end;
  };
  auto other = [](char32_t c) { return !is_whitespace(c) && !is_letter(c) && !is_number(c); };
  auto match_at = [&](size_t i) -> size_t {
    size_t after;
    const char32_t c = char_at(i, after);
    if (c == '\'' && after < n) {
      const std::string_view rest = s.substr(after);
      for (const std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        if (rest.substr(0, suffix.size()) == suffix) return after + suffix.size();
      }
    }
    // ` ?X+` for the three classes, in the expression's order.
    const size_t body = (c == ' ' && after < n) ? after : i;
    size_t body_next;
    const char32_t b = char_at(body, body_next);
    if (is_letter(b)) return run(body, is_letter);
    if (is_number(b)) return run(body, is_number);
    if (other(b)) return run(body, other);
    // Whitespace: the whole run if it ends the text, else all but its last code point (which
    // then starts the next match, e.g. " word"), else the single code point.
    const size_t end = run(i, is_whitespace);
    if (end == n) return end;
    size_t last = i, k = i;
    while (k < end) {
      last = k;
      char_at(k, k);
    }
    return last > i ? last : end;
  };
  size_t previous = 0;
  for (size_t i = 0; i < n;) {
    const size_t end = match_at(i);
    if (previous != i) matches.push_back({{previous, i}, false});
    matches.push_back({{i, end}, true});
    previous = i = end;
  }
  return matches;
}

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([&](NormalizedString&& n) {
      if (add_prefix_space_ && (n.get().empty() || n.get()[0] != ' ')) n.prepend(" ");
      if (!use_regex_) return std::vector<NormalizedString>{std::move(n)};
      return n.split(gpt2_matches(n.get()), SplitBehavior::Isolated);
    });
    s.normalize([](NormalizedString& n) { byte_level_transform(n); });
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class Metaspace : public PreTokenizer {
 public:
  enum class Scheme { First, Never, Always };
  Metaspace(char32_t replacement, Scheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(replacement_text_, replacement);
  }
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([&](NormalizedString&& n) {
      n.replace(find_char_matches(n.get(), [](char32_t c) { return c == U' '; }), replacement_text_);
      const bool starts = n.get().compare(0, replacement_text_.size(), replacement_text_) == 0;
      if (!starts &&
          (scheme_ == Scheme::Always || (scheme_ == Scheme::First && n.offsets_original().first == 0))) {
        n.prepend(replacement_text_);
      }
      if (!split_) return std::vector<NormalizedString>{std::move(n)};
      const char32_t r = replacement_;
      return split_on(
          n, [r](char32_t c) { return c == r; }, SplitBehavior::MergedWithNext);
    });
  }

 private:
  char32_t replacement_;
  std::string replacement_text_;
  Scheme scheme_;
  bool split_;
};

class SplitPattern : public PreTokenizer {
 public:
  SplitPattern(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PreTokenizedString& s) const override {
    s.split([&](NormalizedString&& n) {
      Matches matches = pattern_.find_matches(n.get());
      if (invert_) {
        for (auto& m : matches) m.second = !m.second;
      }
      return n.split(std::move(matches), behavior_);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class PreTokenizerSequence : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void pre_tokenize(PreTokenizedString& s) const override {
    for (const auto& p : parts_) p->pre_tokenize(s);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

char32_t read_char(const Json& json, const char* key, const Place& place) {
  const std::string text = read_string(json, key, place);
  OML_CHECK(!text.empty() && first_invalid_utf8(text) == std::string::npos && count_chars(text) == 1,
            ConfigError, place.at(key).describe(), ": expected a single character, got '", text, "'");
  size_t i = 0;
  return next_char(text, i);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& json, const Place& place) {
  const std::string type = read_type(json, place);
  if (type == "BertPreTokenizer") {
    only_keys(json, {}, place);
    return std::make_unique<BertPreTokenizer>();
  }
  if (type == "Whitespace") {
    only_keys(json, {}, place);
    return std::make_unique<Whitespace>();
  }
  if (type == "WhitespaceSplit") {
    only_keys(json, {}, place);
    return std::make_unique<WhitespaceSplit>();
  }
  if (type == "ByteLevel") {
    // trim_offsets belongs to the post-processor; the pre-tokenizer ignores it, as HF's does.
    only_keys(json, {"add_prefix_space", "trim_offsets", "use_regex"}, place);
    return std::make_unique<ByteLevel>(read_bool(json, "add_prefix_space", place, true),
                                       read_bool(json, "use_regex", place, true));
  }
  if (type == "Metaspace") {
    only_keys(json, {"replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep"}, place);
    const std::string scheme_name = read_string(json, "prepend_scheme", place, std::string("always"));
    Metaspace::Scheme scheme;
    if (scheme_name == "always") {
      scheme = Metaspace::Scheme::Always;
    } else if (scheme_name == "first") {
      scheme = Metaspace::Scheme::First;
    } else if (scheme_name == "never") {
      scheme = Metaspace::Scheme::Never;
    } else {
      throw ConfigError(place.at("prepend_scheme").describe() + ": expected always, first or never, got '" +
                        scheme_name + "'");
    }
    if (has(json, "add_prefix_space") && !read_bool(json, "add_prefix_space", place)) {
      OML_CHECK(scheme == Metaspace::Scheme::Never, ConfigError, place.describe(),
                ": add_prefix_space false does not match prepend_scheme '", scheme_name, "'");
      scheme = Metaspace::Scheme::Never;
    }
    return std::make_unique<Metaspace>(read_char(json, "replacement", place), scheme,
                                       read_bool(json, "split", place, true));
  }
  if (type == "Split") {
    only_keys(json, {"pattern", "behavior", "invert"}, place);
    return std::make_unique<SplitPattern>(read_pattern(json, "pattern", place),
                                          read_behavior(json, "behavior", place),
                                          read_bool(json, "invert", place, false));
  }
  if (type == "Punctuation") {
    only_keys(json, {"behavior"}, place);
    return std::make_unique<Punctuation>(has(json, "behavior") ? read_behavior(json, "behavior", place)
                                                               : SplitBehavior::Isolated);
  }
  if (type == "Digits") {
    only_keys(json, {"individual_digits"}, place);
    return std::make_unique<Digits>(read_bool(json, "individual_digits", place, false));
  }
  if (type == "Sequence") {
    only_keys(json, {"pretokenizers"}, place);
    const Json& list = field(json, "pretokenizers", place);
    OML_CHECK(list.is_array(), ConfigError, place.at("pretokenizers").describe(), ": expected a list");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_pre_tokenizer(list[i], place.at("pretokenizers").at(i)));
    }
    return std::make_unique<PreTokenizerSequence>(std::move(parts));
  }
  throw ConfigError(
      place.describe() + ": pre-tokenizer type '" + type +
      "' is not supported (supported: BertPreTokenizer, ByteLevel, Whitespace, WhitespaceSplit, "
      "Metaspace, Split, Punctuation, Digits, Sequence)");
}

}  // namespace oml::text::detail
