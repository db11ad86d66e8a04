// The tokenization models of tokenizer.json: WordPiece, BPE and Unigram, each choosing the
// tokens HF `tokenizers` 0.23's does (including its tie-breaking).

#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <unordered_map>

#include "oml/common/error.h"
#include "text/pipeline.h"
#include "text/unicode.h"

namespace oml::text::detail {
namespace {

/// Hashing that lets a map keyed by std::string be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

std::optional<uint32_t> find(const Vocab& vocab, std::string_view token) {
  const auto it = vocab.find(token);
  if (it == vocab.end()) return std::nullopt;
  return it->second;
}

Vocab read_vocab_object(const Json& json, const Place& place) {
  OML_CHECK(json.is_object(), ConfigError, place.describe(), ": expected an object of token: id");
  Vocab vocab;
  vocab.reserve(json.size());
  for (auto it = json.begin(); it != json.end(); ++it) {
    OML_CHECK(
        it.value().is_number_unsigned() && it.value().get<uint64_t>() <= std::numeric_limits<uint32_t>::max(),
        ConfigError, place.describe(), ": the id of '", it.key(), "' is not a 32-bit unsigned integer");
    vocab[it.key()] = it.value().get<uint32_t>();
  }
  return vocab;
}

/// id -> token, for the tokens' strings. A map, as HF's vocab_r: ids may be sparse, and one id
/// near 2^32 must not cost a table of 2^32 strings.
using ReverseVocab = std::unordered_map<uint32_t, std::string>;
ReverseVocab reverse(const Vocab& vocab) {
  ReverseVocab r;
  r.reserve(vocab.size());
  for (const auto& [token, id] : vocab) r.emplace(id, token);
  return r;
}

// --- WordPiece -------------------------------------------------------------------------------

class WordPiece : public Model {
 public:
  WordPiece(Vocab vocab, std::string unk, std::string prefix, size_t max_chars, std::string place)
      : vocab_(std::move(vocab)),
        unk_(std::move(unk)),
        prefix_(std::move(prefix)),
        max_chars_(max_chars),
        place_(std::move(place)) {
    for (const auto& [token, id] : vocab_) longest_ = std::max(longest_, token.size());
  }

  void tokenize(std::string_view text, std::vector<Token>& out) const override {
    // Greedy longest match from the left; a word with a piece that matches nothing, or longer
    // than max_input_chars_per_word, is one unknown token.
    if (count_chars(text) > max_chars_) {
      out.push_back(unknown(text));
      return;
    }
    const size_t first = out.size();
    std::string candidate;
    for (size_t start = 0; start < text.size();) {
      const std::string_view head = start > 0 ? std::string_view(prefix_) : std::string_view();
      // No vocabulary entry is longer than longest_ bytes: start with the longest end that fits.
      size_t end = text.size();
      while (end > start && head.size() + (end - start) > longest_) end = previous_boundary(text, end);
      std::optional<uint32_t> id;
      while (end > start) {
        candidate.assign(head);
        candidate.append(text.substr(start, end - start));
        if ((id = find(vocab_, candidate))) break;
        end = previous_boundary(text, end);
      }
      if (!id) {
        out.resize(first);
        out.push_back(unknown(text));
        return;
      }
      out.push_back(Token{*id, candidate, {start, end}});
      start = end;
    }
  }

  std::optional<uint32_t> token_to_id(std::string_view token) const override { return find(vocab_, token); }
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  static size_t previous_boundary(std::string_view s, size_t end) {
    do {
      --end;
    } while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80);
    return end;
  }

  Token unknown(std::string_view text) const {
    const auto id = find(vocab_, unk_);
    OML_CHECK(id.has_value(), ConfigError, place_, ": WordPiece's unk_token '", unk_,
              "' is not in its vocab");
    return Token{*id, unk_, {0, text.size()}};
  }

  Vocab vocab_;
  std::string unk_, prefix_;
  size_t max_chars_;
  size_t longest_ = 0;
  std::string place_;
};

// --- BPE -------------------------------------------------------------------------------------

class Bpe : public Model {
 public:
  struct Options {
    std::optional<std::string> unk_token, prefix, suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  };

  Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options options,
      const Place& place)
      : vocab_(std::move(vocab)),
        vocab_r_(reverse(vocab_)),
        options_(std::move(options)),
        place_(place.describe()) {
    const size_t prefix_len = options_.prefix ? options_.prefix->size() : 0;
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [a, b] = merges[rank];
      const auto a_id = find(vocab_, a);
      const auto b_id = find(vocab_, b);
      OML_CHECK(a_id && b_id, ConfigError, place_, ": merge ", rank, " ('", a, "', '", b,
                "') uses a token not in the vocab");
      // As HF: the merged token is a + b without b's first prefix_len bytes.
      OML_CHECK(b.size() >= prefix_len, ConfigError, place_, ": merge ", rank, " ('", a, "', '", b,
                "'): the second token is shorter than continuing_subword_prefix");
      const std::string merged = a + b.substr(prefix_len);
      const auto new_id = find(vocab_, merged);
      OML_CHECK(new_id, ConfigError, place_, ": merge ", rank, " makes '", merged,
                "', which is not in the vocab");
      merges_[key(*a_id, *b_id)] = {static_cast<uint32_t>(rank),
                                    *new_id};  // a repeated pair: the last rank wins
    }
  }

  void tokenize(std::string_view text, std::vector<Token>& out) const override {
    if (text.empty()) return;
    if (options_.ignore_merges) {
      if (const auto id = find(vocab_, text)) {
        out.push_back(Token{*id, std::string(text), {0, text.size()}});
        return;
      }
    }
    std::vector<Symbol> word = initial_symbols(text);
    merge_all(word);
    size_t pos = 0;
    for (const Symbol& s : word) {
      if (s.len == 0) continue;
      const auto token = vocab_r_.find(s.c);
      out.push_back(Token{s.c, token != vocab_r_.end() ? token->second : std::string(), {pos, pos + s.len}});
      pos += s.len;
    }
  }

  std::optional<uint32_t> token_to_id(std::string_view token) const override { return find(vocab_, token); }
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  struct Symbol {
    uint32_t c;
    long prev, next;
    size_t len;
  };
  struct MergeValue {
    uint32_t rank, new_id;
  };
  static uint64_t key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

  static void add(std::vector<Symbol>& word, uint32_t c, size_t len) {
    const long n = static_cast<long>(word.size());
    if (!word.empty()) word.back().next = n;
    word.push_back({c, n - 1, -1, len});
  }

  uint32_t unk_id() const {
    const auto id = find(vocab_, *options_.unk_token);
    OML_CHECK(id.has_value(), ConfigError, place_, ": BPE's unk_token '", *options_.unk_token,
              "' is not in its vocab");
    return *id;
  }

  /// One symbol per code point (with the subword prefix / end-of-word suffix where set), unknown
  /// ones as bytes (byte_fallback) or the unknown token (fused when fuse_unk), as HF's merge_word.
  std::vector<Symbol> initial_symbols(std::string_view w) const {
    std::vector<Symbol> word;
    word.reserve(w.size());
    bool have_unk = false;  // an unknown token is pending (fused with the next under fuse_unk)
    uint32_t unk_token_id = 0;
    size_t unk_len = 0;
    std::string s;
    for (size_t i = 0; i < w.size();) {
      const size_t start = i;
      i += utf8_length(static_cast<unsigned char>(w[i]));
      const size_t byte_len = i - start;
      s.clear();
      if (start > 0 && options_.prefix) s += *options_.prefix;
      s.append(w.substr(start, byte_len));
      if (i == w.size() && options_.suffix) s += *options_.suffix;
      if (const auto id = find(vocab_, s)) {
        if (have_unk) {
          add(word, unk_token_id, unk_len);
          have_unk = false;
        }
        add(word, *id, byte_len);
        continue;
      }
      if (options_.byte_fallback) {
        std::vector<uint32_t> bytes;
        char name[8];
        for (const char b : s) {
          std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(b)));
          const auto id = find(vocab_, name);
          if (!id) break;
          bytes.push_back(*id);
        }
        if (bytes.size() == s.size()) {
          for (const uint32_t id : bytes) add(word, id, 1);
          continue;
        }
      }
      if (options_.unk_token) {
        if (have_unk && options_.fuse_unk) {
          unk_len += byte_len;
        } else {
          if (have_unk) add(word, unk_token_id, unk_len);
          have_unk = true;
          unk_token_id = unk_id();
          unk_len = byte_len;
        }
      }
    }
    if (have_unk) add(word, unk_token_id, unk_len);
    return word;
  }

  /// Applies the merges lowest rank first (leftmost among equals), as HF's Word::merge_all.
  void merge_all(std::vector<Symbol>& symbols) const {
    struct Candidate {
      size_t pos;
      uint32_t rank, new_id;
      bool operator<(const Candidate& o) const {  // priority_queue pops the largest: invert
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Candidate> queue;
    auto lookup = [&](uint32_t a, uint32_t b) -> const MergeValue* {
      const auto it = merges_.find(key(a, b));
      return it == merges_.end() ? nullptr : &it->second;
    };
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      if (const auto* m = lookup(symbols[i].c, symbols[i + 1].c)) queue.push({i, m->rank, m->new_id});
    }
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& current = symbols[top.pos];
      if (current.len == 0 || current.next == -1) continue;
      const auto next_pos = static_cast<size_t>(current.next);
      const Symbol right = symbols[next_pos];
      const auto* m = lookup(current.c, right.c);
      if (m == nullptr || m->new_id != top.new_id) continue;
      current.c = top.new_id;
      current.len += right.len;
      current.next = right.next;
      symbols[next_pos].len = 0;
      if (right.next > -1 && static_cast<size_t>(right.next) < symbols.size()) {
        symbols[static_cast<size_t>(right.next)].prev = static_cast<long>(top.pos);
      }
      if (current.prev >= 0) {
        const auto prev = static_cast<size_t>(current.prev);
        if (const auto* pm = lookup(symbols[prev].c, current.c)) queue.push({prev, pm->rank, pm->new_id});
      }
      if (current.next >= 0 && static_cast<size_t>(current.next) < symbols.size()) {
        if (const auto* nm = lookup(current.c, symbols[static_cast<size_t>(current.next)].c)) {
          queue.push({top.pos, nm->rank, nm->new_id});
        }
      }
    }
  }

  Vocab vocab_;
  ReverseVocab vocab_r_;
  std::unordered_map<uint64_t, MergeValue> merges_;
  Options options_;
  std::string place_;
};

std::vector<std::pair<std::string, std::string>> read_merges(const Json& json, const Place& place) {
  OML_CHECK(json.is_array(), ConfigError, place.describe(), ": expected a list of merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const Json& m = json[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    OML_CHECK(m.is_string(), ConfigError, place.at(i).describe(),
              ": expected [\"a\", \"b\"] or \"a b\", got ", m.dump());
    // The legacy form: exactly two tokens separated by one space.
    const std::string text = m.get<std::string>();
    const size_t space = text.find(' ');
    OML_CHECK(space != std::string::npos && text.find(' ', space + 1) == std::string::npos, ConfigError,
              place.at(i).describe(), ": a merge must be two tokens separated by a space, got '", text, "'");
    merges.emplace_back(text.substr(0, space), text.substr(space + 1));
  }
  return merges;
}

// --- Unigram ---------------------------------------------------------------------------------

class Unigram : public Model {
 public:
  Unigram(std::vector<std::pair<std::string, double>> pieces, std::optional<size_t> unk_id,
          bool byte_fallback, const Place& place)
      : pieces_(std::move(pieces)), unk_id_(unk_id), byte_fallback_(byte_fallback), place_(place.describe()) {
    OML_CHECK(!unk_id_ || !pieces_.empty(), ConfigError, place_, ": Unigram's vocab is empty");
    OML_CHECK(!unk_id_ || *unk_id_ < pieces_.size(), ConfigError, place_, ": Unigram's unk_id ", *unk_id_,
              " is not in its vocab of ", pieces_.size());
    nodes_.push_back(-1);
    for (size_t id = 0; id < pieces_.size(); ++id) {
      const std::string& token = pieces_[id].first;
      ids_[token] = static_cast<uint32_t>(id);  // a repeated token: the last id wins, as in HF
      min_score_ = std::min(min_score_, pieces_[id].second);
      uint32_t node = 0;
      for (const char b : token) {
        const uint64_t k = edge(node, b);
        auto it = edges_.find(k);
        if (it == edges_.end()) {
          it = edges_.emplace(k, static_cast<uint32_t>(nodes_.size())).first;
          nodes_.push_back(-1);
        }
        node = it->second;
      }
      if (!token.empty()) nodes_[node] = 1;  // a token ends here (its id is looked up by string, as HF)
    }
  }

  void tokenize(std::string_view text, std::vector<Token>& out) const override {
    if (text.empty()) return;
    size_t offset = 0;
    std::string name;
    for (const std::string_view piece : best_path(text)) {
      const size_t len = piece.size();
      std::optional<uint32_t> id;
      if (const auto it = ids_.find(piece); it != ids_.end()) id = it->second;
      if (!id && byte_fallback_) {
        std::vector<Token> bytes;
        for (const char b : piece) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(b)));
          const auto it = ids_.find(std::string_view(buf));
          if (it == ids_.end()) break;
          bytes.push_back(Token{it->second, buf, {offset, offset + len}});
        }
        if (bytes.size() == len) {
          for (auto& t : bytes) out.push_back(std::move(t));
          offset += len;
          continue;
        }
      }
      if (!id) id = static_cast<uint32_t>(require_unk());
      out.push_back(Token{*id, std::string(piece), {offset, offset + len}});
      offset += len;
    }
  }

  std::optional<uint32_t> token_to_id(std::string_view token) const override {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  size_t vocab_size() const override { return pieces_.size(); }

 private:
  static uint64_t edge(uint32_t node, char b) {
    return (uint64_t{node} << 8) | static_cast<unsigned char>(b);
  }

  size_t require_unk() const {
    OML_CHECK(unk_id_.has_value(), ConfigError, place_,
              ": Unigram has no unk_id, and the text has a character its vocab lacks");
    return *unk_id_;
  }

  /// The Viterbi segmentation (HF's encode_optimized): the best total score over the vocab's
  /// pieces, a code point no piece starts with scoring min_score - 10 as unknown; consecutive
  /// unknowns fused into one piece.
  std::vector<std::string_view> best_path(std::string_view s) const {
    struct Node {
      size_t id = 0;
      double score = 0;
      long start = -1;  // -1: not reached
    };
    const double unk_score = min_score_ - 10.0;
    std::vector<Node> best(s.size() + 1);
    for (size_t start = 0; start < s.size();) {
      const double here = best[start].score;
      const size_t char_len = static_cast<size_t>(utf8_length(static_cast<unsigned char>(s[start])));
      bool single = false;
      uint32_t node = 0;
      for (size_t end = start; end < s.size();) {
        const auto it = edges_.find(edge(node, s[end]));
        if (it == edges_.end()) break;
        node = it->second;
        ++end;
        if (nodes_[node] < 0) continue;
        const uint32_t id = ids_.find(s.substr(start, end - start))->second;
        const double candidate = pieces_[id].second + here;
        Node& target = best[end];
        if (target.start < 0 || candidate > target.score) target = {id, candidate, static_cast<long>(start)};
        if (end - start == char_len) single = true;
      }
      if (!single) {
        Node& target = best[start + char_len];
        const double candidate = unk_score + here;
        if (target.start < 0 || candidate > target.score) {
          target = {require_unk(), candidate, static_cast<long>(start)};
        }
      }
      start += char_len;
    }
    std::vector<std::string_view> pieces;
    size_t fused_start = 0, fused_end = 0;
    bool fusing = false;
    for (size_t end = s.size(); end > 0;) {
      const Node& node = best[end];
      const auto start = static_cast<size_t>(node.start);
      if (unk_id_ && node.id == *unk_id_) {
        if (!fusing) fused_end = end;
        fusing = true;
        fused_start = start;
      } else {
        if (fusing) pieces.push_back(s.substr(fused_start, fused_end - fused_start));
        fusing = false;
        pieces.push_back(s.substr(start, end - start));
      }
      end = start;
    }
    if (fusing) pieces.push_back(s.substr(fused_start, fused_end - fused_start));
    std::reverse(pieces.begin(), pieces.end());
    return pieces;
  }

  std::vector<std::pair<std::string, double>> pieces_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> ids_;
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node, byte) -> node
  std::vector<int> nodes_;                        // >= 0: a token ends at the node
  std::optional<size_t> unk_id_;
  bool byte_fallback_;
  double min_score_ = std::numeric_limits<double>::infinity();
  std::string place_;
};

std::optional<std::string> read_optional_string(const Json& json, const char* key, const Place& place) {
  if (!has(json, key)) return std::nullopt;
  return read_string(json, key, place);
}

}  // namespace

std::unique_ptr<Model> make_model(const Json& json, const Place& place) {
  const std::string type = has(json, "type") ? read_type(json, place) : std::string();
  if (type == "WordPiece") {
    only_keys(json, {"unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"}, place);
    return std::make_unique<WordPiece>(
        read_vocab_object(field(json, "vocab", place), place.at("vocab")),
        read_string(json, "unk_token", place, std::string("[UNK]")),
        read_string(json, "continuing_subword_prefix", place, std::string("##")),
        read_uint(json, "max_input_chars_per_word", place, 100), place.describe());
  }
  if (type == "BPE") {
    only_keys(json,
              {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
               "byte_fallback", "ignore_merges", "vocab", "merges"},
              place);
    if (has(json, "dropout")) {
      const Json& d = json["dropout"];
      // Dropout samples merges at random: its encodings are not reproducible, so it is refused.
      OML_CHECK(d.is_number() && d.get<double>() == 0.0, ConfigError, place.at("dropout").describe(),
                ": BPE dropout (", d.dump(), ") is random at encoding time and is not supported");
    }
    Bpe::Options options;
    options.unk_token = read_optional_string(json, "unk_token", place);
    options.prefix = read_optional_string(json, "continuing_subword_prefix", place);
    options.suffix = read_optional_string(json, "end_of_word_suffix", place);
    options.fuse_unk = read_bool(json, "fuse_unk", place, false);
    options.byte_fallback = read_bool(json, "byte_fallback", place, false);
    options.ignore_merges = read_bool(json, "ignore_merges", place, false);
    return std::make_unique<Bpe>(read_vocab_object(field(json, "vocab", place), place.at("vocab")),
                                 read_merges(field(json, "merges", place), place.at("merges")),
                                 std::move(options), place);
  }
  if (type == "Unigram") {
    only_keys(json, {"unk_id", "vocab", "byte_fallback"}, place);
    const Json& vocab = field(json, "vocab", place);
    OML_CHECK(vocab.is_array(), ConfigError, place.at("vocab").describe(),
              ": expected a list of [token, score]");
    std::vector<std::pair<std::string, double>> pieces;
    pieces.reserve(vocab.size());
    for (size_t i = 0; i < vocab.size(); ++i) {
      const Json& p = vocab[i];
      OML_CHECK(p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_number(), ConfigError,
                place.at("vocab").at(i).describe(), ": expected [token, score], got ", p.dump());
      pieces.emplace_back(p[0].get<std::string>(), p[1].get<double>());
    }
    std::optional<size_t> unk_id;
    if (has(json, "unk_id")) unk_id = read_uint(json, "unk_id", place);
    return std::make_unique<Unigram>(std::move(pieces), unk_id,
                                     read_bool(json, "byte_fallback", place, false), place);
  }
  throw ConfigError(place.describe() + ": model type '" + (type.empty() ? std::string("(none)") : type) +
                    "' is not supported (supported: WordPiece, BPE, Unigram)");
}

}  // namespace oml::text::detail
