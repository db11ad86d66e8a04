// The post-processors of tokenizer.json: special tokens around one text or a pair, type ids, and
// the byte-level offset trimming, as HF `tokenizers` 0.23 applies them.

#include <map>

#include "oml/common/error.h"
#include "text/pipeline.h"
#include "text/unicode.h"

namespace oml::text::detail {
namespace {

struct SpecialToken {
  std::string token;
  int64_t id;
};

Encoding special_encoding(const std::vector<int64_t>& ids, const std::vector<std::string>& tokens,
                          int64_t type_id) {
  Encoding e;
  e.ids = ids;
  e.tokens = tokens;
  e.type_ids.assign(ids.size(), type_id);
  e.attention_mask.assign(ids.size(), 1);
  e.special_tokens_mask.assign(ids.size(), 1);
  e.offsets.assign(ids.size(), {0, 0});
  return e;
}

Encoding concat(std::vector<Encoding> parts) {
  Encoding out;
  for (auto& p : parts) {
    auto append = [](auto& to, auto& from) { to.insert(to.end(), from.begin(), from.end()); };
    append(out.ids, p.ids);
    append(out.type_ids, p.type_ids);
    append(out.attention_mask, p.attention_mask);
    append(out.special_tokens_mask, p.special_tokens_mask);
    append(out.offsets, p.offsets);
    for (auto& t : p.tokens) out.tokens.push_back(std::move(t));
  }
  return out;
}

void set_type_ids(Encoding& e, int64_t type_id) { e.type_ids.assign(e.ids.size(), type_id); }

/// BertProcessing and RobertaProcessing: [CLS] A [SEP] (B [SEP]) — Roberta also puts a [SEP]
/// before B and gives B type id 0.
class ClsSep : public PostProcessor {
 public:
  ClsSep(SpecialToken cls, SpecialToken sep, bool roberta, bool trim_offsets, bool add_prefix_space)
      : cls_(std::move(cls)),
        sep_(std::move(sep)),
        roberta_(roberta),
        trim_offsets_(trim_offsets),
        add_prefix_space_(add_prefix_space) {}

  size_t added_tokens(bool pair) const override { return pair ? (roberta_ ? 4 : 3) : 2; }

  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override;

 private:
  SpecialToken cls_, sep_;
  bool roberta_, trim_offsets_, add_prefix_space_;
};

/// The ByteLevel post-processor's offset trimming (HF's process_offsets): a token's leading and
/// trailing spaces (the byte-level space 'Ġ' or White_Space) are taken out of its offsets, except
/// the one space add_prefix_space put in front of the first token.
void trim_byte_level_offsets(Encoding& e, bool add_prefix_space) {
  const char32_t space = byte_to_char_table()[' '];
  auto is_space = [&](char32_t c) { return c == space || is_whitespace(c); };
  for (size_t i = 0; i < e.size(); ++i) {
    const std::string& token = e.tokens[i];
    std::vector<char32_t> chars;
    for (size_t k = 0; k < token.size();) chars.push_back(next_char(token, k));
    size_t leading = 0, trailing = 0;
    while (leading < chars.size() && is_space(chars[leading])) ++leading;
    while (trailing < chars.size() && is_space(chars[chars.size() - 1 - trailing])) ++trailing;
    if (leading == 0 && trailing == 0) continue;
    auto& [start, end] = e.offsets[i];
    if (leading > 0) {
      const bool first = i == 0 || start == 0;
      if (first && add_prefix_space && leading == 1) leading = 0;
      start = std::min(start + leading, end);
    }
    if (trailing > 0 && end >= trailing) end = std::max(end - trailing, start);
  }
}

void ClsSep::process(std::vector<Encoding>& encodings, bool add_special_tokens) const {
  if (roberta_) {
    if (trim_offsets_) {
      for (auto& e : encodings) trim_byte_level_offsets(e, add_prefix_space_);
    }
    for (auto& e : encodings) set_type_ids(e, 0);
  }
  // A template before it in a Sequence may leave no encoding: nothing to add to, as HF's
  // BertProcessing maps over none.
  if (!add_special_tokens || encodings.empty()) return;
  const std::vector<int64_t> cls_id{cls_.id}, sep_id{sep_.id};
  const std::vector<std::string> cls_token{cls_.token}, sep_token{sep_.token};
  Encoding& a = encodings[0];
  a = concat({special_encoding(cls_id, cls_token, 0), std::move(a), special_encoding(sep_id, sep_token, 0)});
  if (encodings.size() == 2) {
    Encoding& b = encodings[1];
    if (roberta_) {
      b = concat(
          {special_encoding(sep_id, sep_token, 0), std::move(b), special_encoding(sep_id, sep_token, 0)});
    } else {
      b = concat({std::move(b), special_encoding(sep_id, sep_token, 1)});
    }
  }
}

class ByteLevelProcessor : public PostProcessor {
 public:
  ByteLevelProcessor(bool trim_offsets, bool add_prefix_space)
      : trim_offsets_(trim_offsets), add_prefix_space_(add_prefix_space) {}
  size_t added_tokens(bool) const override { return 0; }
  void process(std::vector<Encoding>& encodings, bool) const override {
    if (!trim_offsets_) return;
    for (auto& e : encodings) trim_byte_level_offsets(e, add_prefix_space_);
  }

 private:
  bool trim_offsets_, add_prefix_space_;
};

class Template : public PostProcessor {
 public:
  struct Piece {
    bool sequence;      // $A / $B, else a special token
    bool b = false;     // sequence B
    std::string token;  // the special token's name
    int64_t type_id = 0;
  };
  struct Special {
    std::vector<int64_t> ids;
    std::vector<std::string> tokens;
  };

  Template(std::vector<Piece> single, std::vector<Piece> pair, std::map<std::string, Special> specials)
      : single_(std::move(single)), pair_(std::move(pair)), specials_(std::move(specials)) {}

  size_t added_tokens(bool pair) const override {
    size_t n = 0;
    for (const Piece& p : pair ? pair_ : single_) {
      if (!p.sequence) n += specials_.at(p.token).ids.size();
    }
    return n;
  }

  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override {
    if (encodings.empty()) return;  // a template before it in a Sequence left none
    std::vector<Encoding> parts;
    // read_template keeps B out of the single template, so the index exists.
    for (const Piece& p : encodings.size() == 2 ? pair_ : single_) {
      if (p.sequence) {
        Encoding e = encodings[p.b ? 1 : 0];
        set_type_ids(e, p.type_id);
        parts.push_back(std::move(e));
      } else if (add_special_tokens) {
        const Special& s = specials_.at(p.token);
        parts.push_back(special_encoding(s.ids, s.tokens, p.type_id));
      }
    }
    encodings = std::move(parts);
  }

 private:
  std::vector<Piece> single_, pair_;
  std::map<std::string, Special> specials_;
};

class PostProcessorSequence : public PostProcessor {
 public:
  explicit PostProcessorSequence(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  size_t added_tokens(bool pair) const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->added_tokens(pair);
    return n;
  }
  void process(std::vector<Encoding>& encodings, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(encodings, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

SpecialToken read_special(const Json& json, const char* key, const Place& place) {
  const Json& v = field(json, key, place);
  OML_CHECK(v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_number_unsigned(), ConfigError,
            place.at(key).describe(), ": expected [token, id], got ", v.dump());
  return {v[0].get<std::string>(), v[1].get<int64_t>()};
}

std::vector<Template::Piece> read_template(const Json& json, const char* key, const Place& place,
                                           const std::map<std::string, Template::Special>& specials) {
  const Json& list = field(json, key, place);
  OML_CHECK(list.is_array(), ConfigError, place.at(key).describe(), ": expected a list of pieces");
  std::vector<Template::Piece> pieces;
  for (size_t i = 0; i < list.size(); ++i) {
    const Place at = place.at(key).at(i);
    const Json& p = list[i];
    OML_CHECK(p.is_object() && p.size() == 1, ConfigError, at.describe(),
              ": expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, got ", p.dump());
    const std::string kind = p.begin().key();
    const Json& body = p.begin().value();
    Template::Piece piece;
    piece.type_id = static_cast<int64_t>(read_uint(body, "type_id", at.at(kind)));
    if (kind == "Sequence") {
      const std::string id = read_string(body, "id", at.at(kind));
      OML_CHECK(id == "A" || id == "B", ConfigError, at.describe(), ": a sequence is A or B, got '", id, "'");
      // As HF's TemplateProcessing: a single text has no second sequence to place.
      OML_CHECK(id == "A" || std::string(key) != "single", ConfigError, at.describe(),
                ": the template for a single text cannot use sequence B (it has only A)");
      piece.sequence = true;
      piece.b = id == "B";
    } else if (kind == "SpecialToken") {
      piece.sequence = false;
      piece.token = read_string(body, "id", at.at(kind));
      OML_CHECK(specials.count(piece.token), ConfigError, at.describe(), ": special token '", piece.token,
                "' is not in special_tokens");
    } else {
      throw ConfigError(at.describe() + ": expected Sequence or SpecialToken, got '" + kind + "'");
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& json, const Place& place) {
  const std::string type = read_type(json, place);
  if (type == "BertProcessing") {
    only_keys(json, {"sep", "cls"}, place);
    return std::make_unique<ClsSep>(read_special(json, "cls", place), read_special(json, "sep", place), false,
                                    false, false);
  }
  if (type == "RobertaProcessing") {
    only_keys(json, {"sep", "cls", "trim_offsets", "add_prefix_space"}, place);
    return std::make_unique<ClsSep>(read_special(json, "cls", place), read_special(json, "sep", place), true,
                                    read_bool(json, "trim_offsets", place, true),
                                    read_bool(json, "add_prefix_space", place, true));
  }
  if (type == "ByteLevel") {
    only_keys(json, {"add_prefix_space", "trim_offsets", "use_regex"}, place);
    return std::make_unique<ByteLevelProcessor>(read_bool(json, "trim_offsets", place, true),
                                                read_bool(json, "add_prefix_space", place, true));
  }
  if (type == "TemplateProcessing") {
    only_keys(json, {"single", "pair", "special_tokens"}, place);
    const Json& specials_json = field(json, "special_tokens", place);
    OML_CHECK(specials_json.is_object(), ConfigError, place.at("special_tokens").describe(),
              ": expected an object");
    std::map<std::string, Template::Special> specials;
    for (auto it = specials_json.begin(); it != specials_json.end(); ++it) {
      const Place at = place.at("special_tokens").at(it.key());
      const Json& s = it.value();
      const Json& ids = field(s, "ids", at);
      const Json& tokens = field(s, "tokens", at);
      OML_CHECK(ids.is_array() && tokens.is_array() && ids.size() == tokens.size(), ConfigError,
                at.describe(), ": ids and tokens must be lists of the same length");
      Template::Special special;
      for (size_t i = 0; i < ids.size(); ++i) {
        OML_CHECK(ids[i].is_number_unsigned() && tokens[i].is_string(), ConfigError, at.describe(),
                  ": ids must be non-negative integers and tokens strings");
        special.ids.push_back(ids[i].get<int64_t>());
        special.tokens.push_back(tokens[i].get<std::string>());
      }
      specials[it.key()] = std::move(special);
    }
    return std::make_unique<Template>(read_template(json, "single", place, specials),
                                      read_template(json, "pair", place, specials), std::move(specials));
  }
  if (type == "Sequence") {
    only_keys(json, {"processors"}, place);
    const Json& list = field(json, "processors", place);
    OML_CHECK(list.is_array(), ConfigError, place.at("processors").describe(), ": expected a list");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i)
      parts.push_back(make_post_processor(list[i], place.at("processors").at(i)));
    return std::make_unique<PostProcessorSequence>(std::move(parts));
  }
  throw ConfigError(place.describe() + ": post-processor type '" + type +
                    "' is not supported (supported: BertProcessing, RobertaProcessing, TemplateProcessing, "
                    "ByteLevel, Sequence)");
}

}  // namespace oml::text::detail
