#include "text/pipeline.h"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include <algorithm>

#include "oml/common/error.h"

namespace oml::text::detail {

// --- JSON reading ----------------------------------------------------------------------------

bool has(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

const Json& field(const Json& object, const char* key, const Place& place) {
  const auto it = object.find(key);
  OML_CHECK(it != object.end(), ConfigError, place.describe(), ": missing \"", key, "\"");
  return *it;
}

bool read_bool(const Json& object, const char* key, const Place& place, std::optional<bool> fallback) {
  if (!has(object, key) && fallback) return *fallback;
  const Json& v = field(object, key, place);
  OML_CHECK(v.is_boolean(), ConfigError, place.at(key).describe(), ": expected true or false, got ",
            v.dump());
  return v.get<bool>();
}

uint64_t read_uint(const Json& object, const char* key, const Place& place,
                   std::optional<uint64_t> fallback) {
  if (!has(object, key) && fallback) return *fallback;
  const Json& v = field(object, key, place);
  OML_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), ConfigError,
            place.at(key).describe(), ": expected a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

std::string read_string(const Json& object, const char* key, const Place& place,
                        std::optional<std::string> fallback) {
  if (!has(object, key) && fallback) return *fallback;
  const Json& v = field(object, key, place);
  OML_CHECK(v.is_string(), ConfigError, place.at(key).describe(), ": expected a string, got ", v.dump());
  return v.get<std::string>();
}

std::string read_type(const Json& object, const Place& place) {
  OML_CHECK(object.is_object(), ConfigError, place.describe(), ": expected an object, got ", object.dump());
  OML_CHECK(
      has(object, "type") && object["type"].is_string(), ConfigError, place.describe(),
      ": a component without a \"type\" (the untagged form of old tokenizers releases) is not supported");
  return object["type"].get<std::string>();
}

void only_keys(const Json& object, std::initializer_list<const char*> known, const Place& place) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.key() == "type") continue;
    const bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
    OML_CHECK(ok, ConfigError, place.describe(), ": option \"", it.key(), "\" of ", read_type(object, place),
              " is not supported");
  }
}

SplitBehavior read_behavior(const Json& object, const char* key, const Place& place) {
  const std::string name = read_string(object, key, place);
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  throw ConfigError(place.at(key).describe() + ": unknown split behavior '" + name +
                    "' (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

// --- PreTokenizedString ----------------------------------------------------------------------

PreTokenizedString::PreTokenizedString(std::string original) : original_(original) {
  splits_.push_back(Split{NormalizedString(std::move(original)), std::nullopt});
}

// --- Pattern ---------------------------------------------------------------------------------

struct Pattern::Compiled {
  std::unique_ptr<icu::RegexPattern> pattern;
};

Pattern::Pattern(const std::string& text, bool regex, const Place& place) {
  if (!regex) {
    literal_ = text;
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  UParseError error{};
  regex_ = std::make_unique<Compiled>();
  regex_->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(text), 0, error, status));
  OML_CHECK(U_SUCCESS(status), ConfigError, place.describe(), ": the regular expression '", text,
            "' is not one ICU's engine reads (", u_errorName(status), " at offset ", error.offset, ")");
}

Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;

Matches Pattern::find_matches(std::string_view s) const {
  Matches matches;
  if (s.empty()) {
    matches.push_back({{0, 0}, false});
    return matches;
  }
  size_t previous = 0;
  auto add = [&](size_t start, size_t end) {
    if (previous != start) matches.push_back({{previous, start}, false});
    matches.push_back({{start, end}, true});
    previous = end;
  };
  if (!regex_) {
    if (literal_.empty()) {
      // HF: an empty literal matches nothing and gives one piece (its end counted in code points).
      matches.push_back({{0, count_chars(s)}, false});
      return matches;
    }
    for (size_t at = s.find(literal_); at != std::string_view::npos;
         at = s.find(literal_, at + literal_.size())) {
      add(at, at + literal_.size());
    }
  } else {
    // The matcher walks the UTF-8 text in place (its native indexes are byte offsets).
    UErrorCode status = U_ZERO_ERROR;
    UText* text = utext_openUTF8(nullptr, s.data(), static_cast<int64_t>(s.size()), &status);
    std::unique_ptr<icu::RegexMatcher> matcher(regex_->pattern->matcher(status));
    OML_CHECK(U_SUCCESS(status), RuntimeError, "ICU regex matcher: ", u_errorName(status));
    matcher->reset(text);
    while (matcher->find(status) && U_SUCCESS(status)) {
      add(static_cast<size_t>(matcher->start64(status)), static_cast<size_t>(matcher->end64(status)));
    }
    matcher.reset();
    utext_close(text);
    OML_CHECK(U_SUCCESS(status), RuntimeError, "ICU regex matching failed: ", u_errorName(status));
  }
  if (previous != s.size()) matches.push_back({{previous, s.size()}, false});
  return matches;
}

Pattern read_pattern(const Json& object, const char* key, const Place& place) {
  const Json& p = field(object, key, place);
  if (p.is_object() && p.size() == 1 && p.begin().value().is_string()) {
    if (p.begin().key() == "String")
      return Pattern(p.begin().value().get<std::string>(), false, place.at(key));
    if (p.begin().key() == "Regex") return Pattern(p.begin().value().get<std::string>(), true, place.at(key));
  }
  throw ConfigError(place.at(key).describe() + ": expected {\"String\": ...} or {\"Regex\": ...}, got " +
                    p.dump());
}

// --- Byte-level alphabet ---------------------------------------------------------------------

const char32_t* byte_to_char_table() {
  // GPT-2's table: the printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves,
  // the others take the code points from U+0100 on, in byte order.
  static const auto table = [] {
    std::array<char32_t, 256> t{};
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table.data();
}

void byte_level_transform(NormalizedString& s) {
  const char32_t* table = byte_to_char_table();
  std::vector<Change> changes;
  const std::string& text = s.get();
  changes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const int n = utf8_length(static_cast<unsigned char>(text[i]));
    for (int k = 0; k < n; ++k)
      changes.push_back({table[static_cast<unsigned char>(text[i + k])], k > 0 ? 1 : 0});
    i += n;
  }
  s.transform(changes, 0);
}

}  // namespace oml::text::detail
