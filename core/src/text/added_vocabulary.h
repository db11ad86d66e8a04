#pragma once
// The tokens tokenizer.json lists under "added_tokens": found in the text before the model runs
// (on the raw text when their "normalized" flag is false, on the normalized text otherwise) and
// kept whole, with their single_word / lstrip / rstrip rules — HF's AddedVocabulary.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/pipeline.h"

namespace oml::text::detail {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class AddedVocabulary {
 public:
  /// Adds the tokens in order as HF does when it loads a file: a token the model knows keeps the
  /// model's id, another gets the next free id. `normalizer` may be null.
  void add(const std::vector<AddedToken>& tokens, const Model& model, const Normalizer* normalizer,
           const Place& place);

  /// The input cut at the added tokens, the other pieces normalized (HF's extract_and_normalize).
  PreTokenizedString extract_and_normalize(const Normalizer* normalizer, std::string text) const;

  std::optional<uint32_t> token_to_id(std::string_view content) const;
  /// Added tokens whose content the model's vocabulary does not have.
  size_t count_outside(const Model& model) const;

 private:
  /// A byte trie of the patterns, searched leftmost-longest.
  struct Trie {
    std::vector<std::unordered_map<unsigned char, uint32_t>> children{1};
    std::vector<int64_t> value{-1};  // the added token id ending at a node, or -1
    bool empty() const { return children.size() == 1; }
  };
  struct Match {
    std::optional<uint32_t> id;
    Range range;
  };
  std::vector<Match> find_matches(const std::string& sentence, const Trie& trie) const;
  std::vector<Split> split_with_indices(NormalizedString s, const Trie& trie) const;
  void rebuild(const Place& place);

  std::unordered_map<std::string, uint32_t> ids_;              // content -> id
  std::map<uint32_t, AddedToken> by_id_;                       // id -> token
  std::unordered_map<uint32_t, std::string> normalized_form_;  // id -> its normalized content when it differs
  Trie raw_, normalized_;
};

}  // namespace oml::text::detail
