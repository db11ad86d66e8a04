#include "text/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <iterator>

#include "oml/common/error.h"

namespace oml::text::detail {

size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    char32_t min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2, min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3, min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    char32_t c = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return i;
      c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t count_chars(std::string_view s) {
  size_t n = 0;
  for (const char b : s) n += (static_cast<unsigned char>(b) & 0xC0) != 0x80;
  return n;
}

bool is_ascii(std::string_view s) {
  for (const char b : s) {
    if (static_cast<unsigned char>(b) >= 0x80) return false;
  }
  return true;
}

namespace {

/// Whether `c` was assigned in Unicode `major`.`minor` or earlier (ICU knows each code point's age).
bool assigned_by(char32_t c, int major, int minor) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  if (age[0] == 0) return false;  // unassigned
  return age[0] < major || (age[0] == major && age[1] <= minor);
}

uint32_t category_mask(char32_t c) { return U_MASK(u_charType(static_cast<UChar32>(c))); }

const icu::Normalizer2& instance(bool compatibility, bool compose) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n =
      compatibility
          ? (compose ? icu::Normalizer2::getNFKCInstance(status) : icu::Normalizer2::getNFKDInstance(status))
          : (compose ? icu::Normalizer2::getNFCInstance(status) : icu::Normalizer2::getNFDInstance(status));
  OML_CHECK(U_SUCCESS(status) && n != nullptr, RuntimeError,
            "ICU could not load its normalization data: ", u_errorName(status));
  return *n;
}

// HF's normalization forms come from unicode-normalization-alignments, whose tables are
// Unicode 9.0: a code point assigned later neither decomposes nor composes and has combining
// class 0 there. Unicode's stability policy keeps the mappings of older code points unchanged,
// so ICU's data restricted to them is those tables.
constexpr int kNormalizationMajor = 9;

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  if (!assigned_by(c, kNormalizationMajor, 0)) return 0;
  return u_getCombiningClass(static_cast<UChar32>(c));
}

void append_decomposition(char32_t c, bool compatibility, std::u32string& out) {
  if (c < 0xA0 || !assigned_by(c, kNormalizationMajor, 0)) {
    out.push_back(c);
    return;
  }
  icu::UnicodeString mapping;
  if (!instance(compatibility, false).getDecomposition(static_cast<UChar32>(c), mapping)) {
    out.push_back(c);
    return;
  }
  for (int32_t i = 0; i < mapping.length();) {
    const UChar32 d = mapping.char32At(i);
    out.push_back(static_cast<char32_t>(d));
    i += U16_LENGTH(d);
  }
}

/// The primary composite of `a` and `b`, or 0.
char32_t compose(char32_t a, char32_t b) {
  if (b < 0x300) return 0;  // no composition has a second part below the combining marks
  const UChar32 r = instance(false, true).composePair(static_cast<UChar32>(a), static_cast<UChar32>(b));
  if (r < 0 || !assigned_by(static_cast<char32_t>(r), kNormalizationMajor, 0)) return 0;
  return static_cast<char32_t>(r);
}

struct Pending {
  uint8_t ccc;
  char32_t c;
  int change;
};

/// The decomposition stream: each input code point's mapping, first part tagged 0 and the rest
/// 1, with each run of combining marks stably sorted by combining class (canonical ordering).
void decompose(std::string_view s, bool compatibility, std::vector<std::pair<char32_t, int>>& out) {
  std::vector<Pending> pending;  // the code points since the last starter (ccc 0), unsorted
  std::u32string mapping;
  auto flush = [&] {
    std::stable_sort(pending.begin(), pending.end(),
                     [](const Pending& a, const Pending& b) { return a.ccc < b.ccc; });
    for (const auto& p : pending) out.emplace_back(p.c, p.change);
    pending.clear();
  };
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_char(s, i);
    mapping.clear();
    append_decomposition(c, compatibility, mapping);
    bool first = true;
    for (const char32_t d : mapping) {
      const uint8_t ccc = combining_class(d);
      if (ccc == 0) flush();
      pending.push_back({ccc, d, first ? 0 : 1});
      first = false;
    }
  }
  flush();
}

/// Canonical composition of a decomposition stream, as the crate does it: a starter absorbs the
/// following marks it composes with unless a mark of the same or higher class stands between;
/// a composite's tag is the sum of its parts' tags minus one.
void recompose(const std::vector<std::pair<char32_t, int>>& in, std::vector<std::pair<char32_t, int>>& out) {
  bool have_composee = false;
  std::pair<char32_t, int> composee{0, 0};
  int last_ccc = -1;  // -1: none since the composee
  std::vector<std::pair<char32_t, int>> held;
  for (const auto& [c, change] : in) {
    const uint8_t ccc = combining_class(c);
    if (!have_composee) {
      if (ccc != 0) {
        out.emplace_back(c, change);
      } else {
        composee = {c, change};
        have_composee = true;
      }
      continue;
    }
    if (last_ccc < 0) {
      if (const char32_t r = compose(composee.first, c)) {
        composee = {r, composee.second + change - 1};
        continue;
      }
      if (ccc == 0) {
        out.push_back(composee);
        composee = {c, change};
        continue;
      }
      held.emplace_back(c, change);
      last_ccc = ccc;
      continue;
    }
    if (last_ccc >= ccc) {
      if (ccc == 0) {
        out.push_back(composee);
        out.insert(out.end(), held.begin(), held.end());
        held.clear();
        composee = {c, change};
        last_ccc = -1;
        continue;
      }
      held.emplace_back(c, change);
      last_ccc = ccc;
      continue;
    }
    if (const char32_t r = compose(composee.first, c)) {
      composee = {r, composee.second + change - 1};
      continue;
    }
    held.emplace_back(c, change);
    last_ccc = ccc;
  }
  if (have_composee) out.push_back(composee);
  out.insert(out.end(), held.begin(), held.end());
}

}  // namespace

void normalize_with_changes(std::string_view s, Form form, std::vector<std::pair<char32_t, int>>& out) {
  const bool compatibility = form == Form::NFKD || form == Form::NFKC;
  if (form == Form::NFD || form == Form::NFKD) {
    decompose(s, compatibility, out);
    return;
  }
  std::vector<std::pair<char32_t, int>> decomposed;
  decomposed.reserve(s.size());
  decompose(s, compatibility, decomposed);
  recompose(decomposed, out);
}

// --- Character classes -----------------------------------------------------------------------

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return (category_mask(c) & (U_GC_ND_MASK | U_GC_NL_MASK | U_GC_NO_MASK)) != 0;
}

// unicode_categories (BertNormalizer, BertPreTokenizer, Punctuation) was generated from
// Unicode 8.0. The code points below were assigned by then but changed category later, so the
// age rule alone gets them wrong (found by comparing every code point with HF).
constexpr int kCategoriesMajor = 8;
constexpr char32_t kPunctuationInV8[] = {0x166D, 0x111C9};                        // now So, Mn
constexpr char32_t kNonspacingMarkInV8[] = {0x1734};                              // now Mc
constexpr char32_t kNotNonspacingMarkInV8[] = {0x1885, 0x1886, 0xA9BD, 0x111C9};  // were Lo, Lo, Mc, Po
// And for unicode-normalization's Unicode 9.0 combining marks:
constexpr char32_t kCombiningMarkInV9[] = {0x1CF2, 0x1CF3};  // now Lo
constexpr char32_t kNotCombiningMarkInV9[] = {0x111C9};      // was Po

template <size_t N>
bool listed(const char32_t (&list)[N], char32_t c) {
  return std::find(std::begin(list), std::end(list), c) != std::end(list);
}

bool is_other_v8(char32_t c) {
  if (c < 0x80) return c < 0x20 || c == 0x7F;
  if (c < 0xA0) return true;
  if ((category_mask(c) & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK)) == 0) return false;
  return assigned_by(c, kCategoriesMajor, 0);
}

bool is_bert_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  if ((category_mask(c) & U_GC_P_MASK) == 0) return listed(kPunctuationInV8, c);
  return assigned_by(c, kCategoriesMajor, 0);
}

bool is_mark_nonspacing_v8(char32_t c) {
  if (c < 0x300) return false;
  if ((category_mask(c) & U_GC_MN_MASK) == 0) return listed(kNonspacingMarkInV8, c);
  return assigned_by(c, kCategoriesMajor, 0) && !listed(kNotNonspacingMarkInV8, c);
}

bool is_combining_mark_v9(char32_t c) {
  if (c < 0x300) return false;
  if ((category_mask(c) & U_GC_M_MASK) == 0) return listed(kCombiningMarkInV9, c);
  return assigned_by(c, kNormalizationMajor, 0) && !listed(kNotCombiningMarkInV9, c);
}

bool is_regex_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const auto u = static_cast<UChar32>(c);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) ||
         (category_mask(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool is_letter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return (category_mask(c) & U_GC_L_MASK) != 0;
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return (category_mask(c) & U_GC_N_MASK) != 0;
}

void append_lowercase(char32_t c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  // The one unconditional full lowercase mapping (SpecialCasing.txt) that differs from the
  // simple one; the conditional ones (final sigma, Lithuanian, Turkic) Rust does not apply.
  if (c == 0x130) {
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  out.push_back(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
}

}  // namespace oml::text::detail
