#include "text/normalized_string.h"

#include <algorithm>

#include "oml/common/error.h"

namespace oml::text::detail {

NormalizedString::NormalizedString(std::string text) : original_(text), normalized_(std::move(text)) {
  alignments_.reserve(normalized_.size());
  for (size_t i = 0; i < normalized_.size();) {
    const size_t start = i;
    i += utf8_length(static_cast<unsigned char>(normalized_[i]));
    for (size_t k = start; k < i; ++k) alignments_.emplace_back(start, i);
  }
}

std::optional<Range> NormalizedString::normalized_to_original(Range range) const {
  // HF returns an empty range unchanged, in whichever referential it was asked.
  if (range.first == range.second) return range;
  if (range.first > range.second || range.second > alignments_.size()) return std::nullopt;
  return Range{alignments_[range.first].first, alignments_[range.second - 1].second};
}

std::optional<Range> NormalizedString::original_to_normalized(Range range) const {
  if (range.first == range.second) return range;
  if (range.first > range.second) return std::nullopt;
  std::optional<size_t> start, end;
  for (size_t i = 0; i < alignments_.size(); ++i) {
    const Range& a = alignments_[i];
    if (range.second < a.second) break;
    if (!start && range.first <= a.first && a.first != a.second) start = i;
    end = i + 1;
  }
  if (start && end) return Range{*start, *end};
  if (start) return Range{*start, *start};
  if (end) return Range{*end, *end};
  return std::nullopt;
}

NormalizedString NormalizedString::slice(Range r) const {
  auto boundary = [](const std::string& s, size_t b) {
    return b == s.size() || (b < s.size() && (static_cast<unsigned char>(s[b]) & 0xC0) != 0x80);
  };
  OML_ASSERT(r.first <= r.second && boundary(normalized_, r.first) && boundary(normalized_, r.second),
             "slice [", r.first, ", ", r.second, ") of a ", normalized_.size(), "-byte string");
  const Range o = *normalized_to_original(r);
  NormalizedString piece;
  if (o.first <= o.second && o.second <= original_.size())
    piece.original_ = original_.substr(o.first, o.second - o.first);
  piece.normalized_ = normalized_.substr(r.first, r.second - r.first);
  piece.alignments_.reserve(r.second - r.first);
  for (size_t i = r.first; i < r.second; ++i) {
    piece.alignments_.emplace_back(alignments_[i].first - o.first, alignments_[i].second - o.first);
  }
  piece.original_shift_ = original_shift_ + o.first;
  return piece;
}

void NormalizedString::transform_range(Range range, const std::vector<Change>& changes,
                                       size_t initial_offset) {
  // Walk the replaced code points alongside the changes: a change <= 0 consumes one (and -change
  // more), a change > 0 inserts and takes the alignment of the byte before it.
  size_t offset = range.first;
  auto consume = [&] {
    if (offset < range.second) offset += utf8_length(static_cast<unsigned char>(normalized_[offset]));
  };
  for (size_t k = 0; k < initial_offset; ++k) consume();
  std::string text;
  std::vector<Range> aligns;
  text.reserve(range.second - range.first + changes.size());
  aligns.reserve(text.capacity());
  for (const Change& change : changes) {
    Range align{0, 0};
    if (change.change > 0) {
      if (offset >= 1) align = alignments_.at(offset - 1);
    } else {
      OML_ASSERT(offset < alignments_.size(), "a normalization step replaces past the end of its text");
      align = alignments_[offset];
      consume();
      for (int k = 0; k < -change.change; ++k) consume();
    }
    const size_t before = text.size();
    append_utf8(text, change.c);
    aligns.insert(aligns.end(), text.size() - before, align);
  }
  normalized_.replace(range.first, range.second - range.first, text);
  alignments_.erase(alignments_.begin() + static_cast<std::ptrdiff_t>(range.first),
                    alignments_.begin() + static_cast<std::ptrdiff_t>(range.second));
  alignments_.insert(alignments_.begin() + static_cast<std::ptrdiff_t>(range.first), aligns.begin(),
                     aligns.end());
}

void NormalizedString::transform(const std::vector<Change>& changes, size_t initial_offset) {
  const auto range = original_to_normalized({0, original_.size()});
  if (!range) return;
  transform_range(*range, changes, initial_offset);
}

void NormalizedString::prepend(std::string_view s) {
  if (normalized_.empty()) return;
  size_t i = 0;
  const char32_t next = next_char(normalized_, i);
  std::vector<Change> changes;
  bool first = true;
  for (size_t k = 0; k < s.size();) {
    changes.push_back({next_char(s, k), first ? 0 : 1});
    first = false;
  }
  changes.push_back({next, 1});
  transform_range({0, i}, changes, 0);
}

void NormalizedString::lowercase() {
  const auto range = original_to_normalized({0, original_.size()});
  if (!range) return;
  const std::string_view part(normalized_.data() + range->first, range->second - range->first);
  if (is_ascii(part)) {
    // One byte for one byte: the alignments stay.
    for (size_t i = range->first; i < range->second; ++i) {
      char& b = normalized_[i];
      if (b >= 'A' && b <= 'Z') b = static_cast<char>(b + 32);
    }
    return;
  }
  std::vector<Change> changes;
  changes.reserve(part.size());
  std::u32string lower;
  for (size_t i = 0; i < part.size();) {
    lower.clear();
    append_lowercase(next_char(part, i), lower);
    for (size_t k = 0; k < lower.size(); ++k) changes.push_back({lower[k], k > 0 ? 1 : 0});
  }
  transform_range(*range, changes, 0);
}

void NormalizedString::strip(bool left, bool right) {
  std::vector<char32_t> chars;
  for (size_t i = 0; i < normalized_.size();) chars.push_back(next_char(normalized_, i));
  const auto count = static_cast<std::ptrdiff_t>(chars.size());
  std::ptrdiff_t leading = 0, trailing = 0;
  if (left) {
    while (leading < count && is_whitespace(chars[leading])) ++leading;
  }
  if (right) {
    while (trailing < count && is_whitespace(chars[count - 1 - trailing])) ++trailing;
  }
  if (leading == 0 && trailing == 0) return;
  // HF compares the code point index with the *byte* length here; reproduced, since which code
  // point carries the removal decides nothing but is cheap to keep identical.
  const auto last_kept = static_cast<std::ptrdiff_t>(normalized_.size()) - trailing - 1;
  std::vector<Change> changes;
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    if (i < leading || i >= count - trailing) continue;
    changes.push_back({chars[i], i == last_kept ? static_cast<int>(-trailing) : 0});
  }
  transform(changes, static_cast<size_t>(leading));
}

void NormalizedString::replace(const Matches& matches, std::string_view content) {
  std::string text;
  std::vector<Range> aligns;
  text.reserve(normalized_.size());
  aligns.reserve(normalized_.size());
  size_t last_end = 0;
  for (const auto& [range, is_match] : matches) {
    if (!is_match) continue;
    const auto [start, end] = range;
    text.append(normalized_, last_end, start - last_end);
    aligns.insert(aligns.end(), alignments_.begin() + static_cast<std::ptrdiff_t>(last_end),
                  alignments_.begin() + static_cast<std::ptrdiff_t>(start));
    // Every inserted code point takes the alignment of the match's last byte.
    const Range align = end >= 1 ? alignments_[end - 1] : Range{0, 0};
    const size_t before = text.size();
    text.append(content);
    aligns.insert(aligns.end(), text.size() - before, align);
    last_end = end;
  }
  text.append(normalized_, last_end, std::string::npos);
  aligns.insert(aligns.end(), alignments_.begin() + static_cast<std::ptrdiff_t>(last_end), alignments_.end());
  normalized_ = std::move(text);
  alignments_ = std::move(aligns);
}

std::vector<NormalizedString> NormalizedString::split(Matches matches, SplitBehavior behavior) const {
  // (range, remove) after the behaviour has merged or dropped the delimiters.
  Matches pieces;
  pieces.reserve(matches.size());
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (auto& m : matches) pieces.push_back({m.first, false});
      break;
    case SplitBehavior::Removed:
      pieces = std::move(matches);
      break;
    case SplitBehavior::Contiguous: {
      bool previous = false;
      for (const auto& [range, is_match] : matches) {
        if (is_match == previous && !pieces.empty()) {
          pieces.back().first.second = range.second;
        } else {
          pieces.push_back({range, false});
        }
        previous = is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previous = false;
      for (const auto& [range, is_match] : matches) {
        if (is_match && !previous && !pieces.empty()) {
          pieces.back().first.second = range.second;
        } else {
          pieces.push_back({range, false});
        }
        previous = is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previous = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->second && !previous && !pieces.empty()) {
          pieces.back().first.first = it->first.first;
        } else {
          pieces.push_back({it->first, false});
        }
        previous = it->second;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  std::vector<NormalizedString> out;
  out.reserve(pieces.size());
  for (const auto& [range, remove] : pieces) {
    if (!remove) out.push_back(slice(range));
  }
  return out;
}

}  // namespace oml::text::detail
