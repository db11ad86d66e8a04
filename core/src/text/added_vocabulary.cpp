#include "text/added_vocabulary.h"

#include "oml/common/error.h"
#include "text/unicode.h"

namespace oml::text::detail {

void AddedVocabulary::add(const std::vector<AddedToken>& tokens, const Model& model,
                          const Normalizer* normalizer, const Place& place) {
  const auto vocab_size = static_cast<uint32_t>(model.vocab_size());
  uint32_t next_id = vocab_size;
  if (!by_id_.empty()) {
    const uint32_t top = by_id_.rbegin()->first;
    next_id = (top >= vocab_size || vocab_size == 0) ? top + 1 : vocab_size;
  }
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    if (const auto it = ids_.find(token.content); it != ids_.end()) {
      const auto same = by_id_.find(it->second);
      if (same != by_id_.end()) {
        const AddedToken& t = same->second;
        if (t.single_word == token.single_word && t.lstrip == token.lstrip && t.rstrip == token.rstrip &&
            t.normalized == token.normalized && t.special == token.special) {
          continue;
        }
      }
    }
    uint32_t id;
    if (const auto known = token_to_id(token.content)) {
      id = *known;
    } else if (const auto in_model = model.token_to_id(token.content)) {
      id = *in_model;
    } else {
      id = next_id++;
    }
    if (token.normalized && normalizer != nullptr) {
      NormalizedString s(token.content);
      normalizer->normalize(s);
      if (s.get() != token.content) normalized_form_[id] = s.get();
    }
    ids_[token.content] = id;
    by_id_[id] = token;
  }
  rebuild(place);
}

void AddedVocabulary::rebuild(const Place& place) {
  raw_ = Trie{};
  normalized_ = Trie{};
  for (const auto& [id, token] : by_id_) {
    Trie& trie = token.normalized ? normalized_ : raw_;
    const auto form = normalized_form_.find(id);
    const std::string& pattern =
        (token.normalized && form != normalized_form_.end()) ? form->second : token.content;
    uint32_t node = 0;
    for (const char b : pattern) {
      auto& children = trie.children[node];
      const auto it = children.find(static_cast<unsigned char>(b));
      if (it != children.end()) {
        node = it->second;
        continue;
      }
      const auto child = static_cast<uint32_t>(trie.children.size());
      children.emplace(static_cast<unsigned char>(b), child);
      trie.children.emplace_back();
      trie.value.push_back(-1);
      node = child;
    }
    // Two added tokens with one pattern cannot both be found (HF's automaton refuses to build).
    OML_CHECK(pattern.empty() || trie.value[node] < 0, ConfigError, place.describe(), ": added tokens ",
              trie.value[node], " and ", id, " are both matched as '", pattern, "'");
    trie.value[node] = id;
  }
}

std::optional<uint32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = ids_.find(std::string(content));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

size_t AddedVocabulary::count_outside(const Model& model) const {
  size_t n = 0;
  for (const auto& [content, id] : ids_) n += !model.token_to_id(content).has_value();
  return n;
}

namespace {

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t i = start;
  return is_regex_word(next_char(s, i));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_regex_word(next_char(s, i));
}

/// Byte where the run of White_Space that ends `s` starts.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_whitespace(next_char(s, i))) break;
    end = start;
  }
  return end;
}

/// Bytes of the run of White_Space that starts `s`.
size_t leading_space_end(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!is_whitespace(next_char(s, next))) break;
    i = next;
  }
  return i;
}

}  // namespace

std::vector<AddedVocabulary::Match> AddedVocabulary::find_matches(const std::string& sentence,
                                                                  const Trie& trie) const {
  if (sentence.empty()) return {Match{std::nullopt, {0, 0}}};
  if (trie.empty()) return {Match{std::nullopt, {0, sentence.size()}}};
  std::vector<Match> splits;
  size_t start_offset = 0;
  // Leftmost-longest matches, each search resuming where the previous *match* ended (not where
  // its stripped whitespace did), as HF's automaton iterates.
  for (size_t p = 0; p < sentence.size();) {
    int64_t id = -1;
    size_t end = 0;
    uint32_t node = 0;
    for (size_t k = p; k < sentence.size(); ++k) {
      const auto& children = trie.children[node];
      const auto it = children.find(static_cast<unsigned char>(sentence[k]));
      if (it == children.end()) break;
      node = it->second;
      if (trie.value[node] >= 0) {
        id = trie.value[node];
        end = k + 1;
      }
    }
    if (id < 0) {
      ++p;
      continue;
    }
    size_t start = p, stop = end;
    p = end;
    const AddedToken& token = by_id_.at(static_cast<uint32_t>(id));
    if (token.single_word) {
      const bool start_space = start == 0 || !ends_with_word(std::string_view(sentence).substr(0, start));
      const bool stop_space =
          stop == sentence.size() || !starts_with_word(std::string_view(sentence).substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip)
      start = std::max(trailing_space_start(std::string_view(sentence).substr(0, start)), start_offset);
    if (token.rstrip) stop += leading_space_end(std::string_view(sentence).substr(stop));
    if (start_offset < start) splits.push_back(Match{std::nullopt, {start_offset, start}});
    splits.push_back(Match{static_cast<uint32_t>(id), {start, stop}});
    start_offset = stop;
  }
  if (start_offset != sentence.size()) splits.push_back(Match{std::nullopt, {start_offset, sentence.size()}});
  return splits;
}

std::vector<Split> AddedVocabulary::split_with_indices(NormalizedString s, const Trie& trie) const {
  std::vector<Split> out;
  for (const Match& m : find_matches(s.get(), trie)) {
    NormalizedString piece = s.slice(m.range);
    if (m.id) {
      std::string value = piece.get();
      const size_t len = value.size();
      std::vector<Token> tokens{Token{*m.id, std::move(value), {0, len}}};
      out.push_back(Split{std::move(piece), std::move(tokens)});
    } else {
      out.push_back(Split{std::move(piece), std::nullopt});
    }
  }
  return out;
}

PreTokenizedString AddedVocabulary::extract_and_normalize(const Normalizer* normalizer,
                                                          std::string text) const {
  PreTokenizedString pieces(std::move(text));
  pieces.split([&](NormalizedString&& s) { return split_with_indices(std::move(s), raw_); });
  pieces.split([&](NormalizedString&& s) {
    if (normalizer != nullptr) normalizer->normalize(s);
    return split_with_indices(std::move(s), normalized_);
  });
  return pieces;
}

}  // namespace oml::text::detail
