#pragma once
// Small string helpers used in messages.

#include <string>
#include <vector>

namespace oml {

/// Levenshtein edit distance.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate closest to `word` by edit distance, or "" when none is reasonably close
/// (distance greater than max(2, |word| / 2)).
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

/// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

/// Hint for an unknown name: " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

std::vector<std::string> split(const std::string& text, char sep);
std::string trim(const std::string& text);
/// The text up to its first newline (c10::Error messages carry a backtrace after it).
std::string first_line(const std::string& text);
bool starts_with(const std::string& text, const std::string& prefix);
bool ends_with(const std::string& text, const std::string& suffix);

/// `text` as valid UTF-8: every byte that does not begin a well-formed sequence (a stray
/// continuation byte, a truncated or overlong sequence, a surrogate, a code point past U+10FFFF)
/// becomes U+FFFD. For messages that quote what a client or a file sent: JSON and terminals need
/// valid UTF-8, and a message must never fail to print because of the bytes it quotes.
std::string valid_utf8(const std::string& text);
/// True when `text` is well-formed UTF-8.
bool is_valid_utf8(const std::string& text);

}  // namespace oml
