#pragma once
// A piece of text being normalized, remembering for every byte which bytes of the original it
// came from: the bookkeeping HF `tokenizers` does (its NormalizedString), reproduced exactly so
// that every offset we report is the one HF reports.
//
// `alignments[b]` is the byte range of `original` that byte b of `normalized` came from. Pieces
// cut out of a string (split, slice) keep their position in the whole input as `original_shift`.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oml::text::detail {

using Range = std::pair<size_t, size_t>;  // [first, second) in bytes

/// How a split keeps the pieces that matched (the names of HF's SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// A list of (range, is_match) covering a string in order: what a pattern finds.
using Matches = std::vector<std::pair<Range, bool>>;

/// One step of a transformation: code point `c` that replaces (change 0), is inserted after the
/// previous one (change 1), or replaces one and removes the next -change (change < 0).
struct Change {
  char32_t c;
  int change;
};

class NormalizedString {
 public:
  NormalizedString() = default;
  explicit NormalizedString(std::string text);

  const std::string& get() const { return normalized_; }
  const std::string& original() const { return original_; }
  bool empty() const { return normalized_.empty(); }
  size_t size() const { return normalized_.size(); }
  /// Byte range of this piece in the whole input.
  Range offsets_original() const { return {original_shift_, original_shift_ + original_.size()}; }

  /// A range of the normalized string mapped to the original, relative to this piece's original
  /// (HF's convert_offsets from normalized); nullopt when the range is outside.
  std::optional<Range> normalized_to_original(Range range) const;
  /// A range of the original mapped into the normalized string (HF's convert_offsets from the
  /// original referential).
  std::optional<Range> original_to_normalized(Range range) const;

  /// The piece of this string at normalized byte range `range` (on code point boundaries).
  NormalizedString slice(Range normalized_range) const;

  /// Replaces the normalized bytes `range` by `changes`; the first `initial_offset` code points of
  /// the range are removed before the first change applies (HF's transform_range).
  void transform_range(Range range, const std::vector<Change>& changes, size_t initial_offset);
  /// transform_range over the whole string, as HF's transform (Range::Original(..)).
  void transform(const std::vector<Change>& changes, size_t initial_offset);

  // The operations normalizers and pre-tokenizers use, each as HF defines it.
  void prepend(std::string_view s);
  void lowercase();
  /// Removes leading and/or trailing White_Space.
  void strip(bool left, bool right);
  /// Replaces each match of `matches` (from a pattern over get()) by `content`.
  void replace(const Matches& matches, std::string_view content);
  /// Keeps the code points for which keep(c) is true.
  template <class Keep>
  void filter(Keep keep);
  /// Maps every code point through map(c).
  template <class Map>
  void map(Map map);

  /// Splits at `matches` (from a pattern over get()) keeping the delimiters as `behavior` says;
  /// empty pieces are left out by the caller (PreTokenizedString::split).
  std::vector<NormalizedString> split(Matches matches, SplitBehavior behavior) const;

 private:
  std::string original_;
  std::string normalized_;
  std::vector<Range> alignments_;
  size_t original_shift_ = 0;
};

/// Matches of a code point predicate over `s`: every matching code point is a match of its own.
template <class Predicate>
Matches find_char_matches(std::string_view s, Predicate is_match);

}  // namespace oml::text::detail

#include "text/normalized_string_inl.h"
