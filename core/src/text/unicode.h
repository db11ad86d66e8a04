#pragma once
// UTF-8 helpers and the character classes the tokenizer pipeline needs, each one matching the
// Unicode data that HF `tokenizers` 0.23 was built with.
//
// Why ICU and not our own tables: the normalization forms, general categories, combining
// classes and case mappings are large, versioned tables that ICU (libicu-dev) already maintains;
// copying them here would mean regenerating and reviewing ~100 kB of data per Unicode release.
// HF `tokenizers` does not use one Unicode version throughout: its components come from crates
// generated at different times (the normalization forms from Unicode 9.0 tables, the BERT
// punctuation / control / mark classes from Unicode 8.0 tables, the regular expressions and
// `char` methods from a recent release). ICU (Unicode 15 on Debian 12) says when each code point
// was assigned (u_charAge), so each class below is "ICU's property, restricted to the code points
// that existed in the Unicode version HF's table was generated from". The exceptions that rule
// cannot express (a code point whose category changed after that version) are listed next to
// the class that needs them. Both were found by comparing, for every code point, each class
// with what HF 0.23.3 does (a one-off check, docs/text.md); text_tokenizer_parity_tests.cpp
// exercises them on real and generated text.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oml::text::detail {

// --- UTF-8 (the strings handed around are valid UTF-8: the tokenizer validates its input) ----

/// Bytes of the UTF-8 sequence that starts with `lead`.
inline int utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

/// The code point at byte `i` of valid UTF-8 `s`; `i` moves past it.
inline char32_t next_char(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const int n = utf8_length(b0);
  char32_t c = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

/// Bytes of `c` in UTF-8.
inline int utf8_size(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

/// Byte offset of the first byte of `s` that is not part of well-formed UTF-8 (overlong forms,
/// surrogates and code points above U+10FFFF are ill-formed), or npos when all of it is.
size_t first_invalid_utf8(std::string_view s);

/// Number of code points in valid UTF-8.
size_t count_chars(std::string_view s);

// --- Character classes ---------------------------------------------------------------------

/// Rust's char::is_whitespace: the White_Space property.
bool is_whitespace(char32_t c);
/// Rust's char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t c);
/// BertNormalizer's "control" (unicode_categories' is_other: Cc, Cf, Co; Unicode 8.0).
bool is_other_v8(char32_t c);
/// unicode_categories' is_punctuation (P*; Unicode 8.0) or ASCII punctuation: what
/// BertPreTokenizer and the Punctuation pre-tokenizer split on.
bool is_bert_punctuation(char32_t c);
/// unicode_categories' is_mark_nonspacing (Mn; Unicode 8.0): what BertNormalizer's
/// strip_accents removes after NFD.
bool is_mark_nonspacing_v8(char32_t c);
/// unicode-normalization's is_combining_mark (Mn, Mc, Me; Unicode 9.0): what StripAccents removes.
bool is_combining_mark_v9(char32_t c);
/// Rust regex's \w: Alphabetic, M*, Nd, Pc, Join_Control.
bool is_regex_word(char32_t c);
/// Oniguruma's \p{L} and \p{N} (the ByteLevel pre-tokenizer's expression).
bool is_letter(char32_t c);
bool is_number(char32_t c);

/// Rust's char::to_lowercase (unconditional full mapping: one code point may become several).
void append_lowercase(char32_t c, std::u32string& out);

// --- Normalization forms, with the alignment information NormalizedString needs -----------

enum class Form { NFD, NFKD, NFC, NFKC };

/// `s` in normalization form `form` as (code point, change) pairs, as the
/// unicode-normalization-alignments crate (HF's) yields them: change 0 replaces one input code
/// point, 1 inserts one. Decomposition gives each input code point's first output 0 and the rest
/// 1, then reorders combining marks (the tags travel with their code points); composition merges
/// tags (a + b - 1). Appends to `out`.
void normalize_with_changes(std::string_view s, Form form, std::vector<std::pair<char32_t, int>>& out);

/// True when every byte of `s` is ASCII, which every normalization form and Lowercase's
/// non-ASCII paths leave alone: lets the pipeline skip the per-code-point work.
bool is_ascii(std::string_view s);

}  // namespace oml::text::detail
