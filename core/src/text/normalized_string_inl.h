#pragma once
// The template members of NormalizedString (included by normalized_string.h).

#include "text/unicode.h"

namespace oml::text::detail {

template <class Keep>
void NormalizedString::filter(Keep keep) {
  // As HF: each kept code point carries how many removed ones follow it (a negative change); the
  // removed ones before the first kept one are the initial offset.
  std::vector<Change> changes;
  changes.reserve(normalized_.size());
  int removed = 0;
  size_t removed_start = 0;
  bool have_last = false;
  char32_t last = 0;
  for (size_t i = 0; i < normalized_.size();) {
    const char32_t c = next_char(normalized_, i);
    if (keep(c)) {
      if (have_last) {
        changes.push_back({last, -removed});
      } else {
        removed_start = static_cast<size_t>(removed);
      }
      last = c;
      have_last = true;
      removed = 0;
    } else {
      ++removed;
    }
  }
  if (have_last) changes.push_back({last, -removed});
  transform(changes, removed_start);
}

template <class Map>
void NormalizedString::map(Map map) {
  std::vector<Change> changes;
  changes.reserve(normalized_.size());
  for (size_t i = 0; i < normalized_.size();) changes.push_back({map(next_char(normalized_, i)), 0});
  transform(changes, 0);
}

template <class Predicate>
Matches find_char_matches(std::string_view s, Predicate is_match) {
  Matches matches;
  if (s.empty()) {
    matches.push_back({{0, 0}, false});
    return matches;
  }
  size_t last_offset = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = next_char(s, i);
    if (is_match(c)) {
      if (last_offset < start) matches.push_back({{last_offset, start}, false});
      matches.push_back({{start, i}, true});
      last_offset = i;
    }
  }
  if (s.size() > last_offset) matches.push_back({{last_offset, s.size()}, false});
  return matches;
}

}  // namespace oml::text::detail
