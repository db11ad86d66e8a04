#include "yaml_tree.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "composition.h"
#include "oml/common/error.h"

namespace oml::config {

namespace detail {

bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

/// The value of an is_index() key; one too large for size_t is past the end of every list
/// (std::stoul threw std::out_of_range for `--set a.18446744073709551616=x`).
std::size_t to_index(const std::string& s) {
  errno = 0;
  const unsigned long long value = std::strtoull(s.c_str(), nullptr, 10);
  return errno == ERANGE || value > std::numeric_limits<std::size_t>::max()
             ? std::numeric_limits<std::size_t>::max()
             : static_cast<std::size_t>(value);
}

namespace {

// The start of each document a YAML parser reports, nothing else.
class DocumentStarts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
  }
  void OnMapEnd() override {}
};

}  // namespace

YAML::Node load_one_document(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw YAML::ParserException(e.mark, "the YAML nests deeper than " + std::to_string(e.depth()) +
                                            " levels (a config nests at most " + std::to_string(kMaxDepth) +
                                            ")");
  }
  // Anything after the first document: yaml-cpp's Load drops it, and its LoadAll never ends on
  // some of it (a stray ',' starts an empty document again and again without being consumed), so
  // the parser is asked for a second document once. yaml-cpp builds nodes only through Load (its
  // node builder is not installed), so this second pass reads the text again for events only.
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts documents;
  if (parser.HandleNextDocument(documents) && parser.HandleNextDocument(documents) &&
      documents.starts.size() >= 2) {
    throw YAML::ParserException(documents.starts[1],
                                "content after the first YAML document (a second document after '---' or "
                                "'...', or a stray character); a config is one document");
  }
  return root.IsDefined() ? root : YAML::Node(YAML::NodeType::Null);
}

}  // namespace detail

namespace {

using detail::kMaxDepth;
using detail::kMaxNodes;

std::string at_mark(const std::string& name, const YAML::Mark& mark) {
  if (mark.line < 0 || name.rfind("--set ", 0) == 0) return name;  // a --set value: the flag names it
  return name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// Walks the tree once: a key given twice in a mapping, a tree deeper than kMaxDepth (a
/// recursive alias) or larger than kMaxNodes (nested aliases) is a ConfigError (`Error` for
/// --set values) naming the place. Python's YAML takes the last of duplicate keys and yaml-cpp
/// the first: neither is what a user who wrote both meant.
template <class Error>
void check_tree(const YAML::Node& node, const std::string& name, int depth, std::size_t& nodes) {
  if (++nodes > kMaxNodes) {
    throw Error(at_mark(name, node.Mark()) + ": the config expands to more than " +
                std::to_string(kMaxNodes) + " values (nested YAML aliases?)");
  }
  if (depth > kMaxDepth) {
    throw Error(at_mark(name, node.Mark()) + ": the config nests deeper than " + std::to_string(kMaxDepth) +
                " levels (a YAML alias used inside its own anchor?)");
  }
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& item : node) {
      const std::string key = item.first.IsScalar() ? item.first.Scalar() : std::string();
      if (item.first.IsScalar()) {
        const auto [it, inserted] = seen.emplace(key, item.first.Mark());
        if (!inserted) {
          throw Error(at_mark(name, item.first.Mark()) + ": key '" + key +
                      "' is given twice in this mapping (" +
                      (it->second.line >= 0 ? "first on line " + std::to_string(it->second.line + 1)
                                            : std::string("first above")) +
                      "); keep one of them");
        }
      }
      check_tree<Error>(item.second, name, depth + 1, nodes);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) check_tree<Error>(item, name, depth + 1, nodes);
  }
}

bool is_merge_key(const YAML::Node& key) {
  // A quoted "<<" is a plain key (its tag is "!"); yaml-cpp gives a plain scalar the tag "?".
  return key.IsScalar() && key.Scalar() == "<<" && key.Tag() != "!";
}

/// YAML merge keys (`<<: *defaults`, `<<: [*a, *b]`), which yaml-cpp keeps as a key named "<<":
/// the mapping gets each key of the merged mappings that it does not set itself, the first
/// merged mapping winning among them (as Python's YAML). Merged values are the merged
/// mappings' own nodes, so messages about them keep their lines. Runs after check_tree, so the
/// tree is finite; a mapping reached twice (an alias) is merged on the first visit.
template <class Error>
void apply_merge_keys(YAML::Node node, const std::string& name) {
  if (node.IsSequence()) {
    for (auto item : node) apply_merge_keys<Error>(item, name);
    return;
  }
  if (!node.IsMap()) return;
  YAML::Node merged(YAML::NodeType::Undefined);
  for (auto item : node) {
    apply_merge_keys<Error>(item.second, name);  // a merged mapping may merge in turn
    if (is_merge_key(item.first)) merged.reset(item.second);
  }
  if (!merged.IsDefined()) return;
  std::vector<YAML::Node> sources;
  if (merged.IsSequence()) {
    for (const auto& source : merged) sources.push_back(source);
  } else {
    sources.push_back(merged);
  }
  for (const auto& source : sources) {
    if (!source.IsMap()) {
      throw Error(at_mark(name, merged.Mark()) +
                  ": a merge key '<<' takes a mapping or a list of mappings (<<: *defaults, "
                  "<<: [*a, *b]), got " +
                  (source.IsSequence() ? "a list"
                   : source.IsNull()   ? "nothing"
                                       : "'" + source.Scalar() + "'"));
    }
  }
  node.remove("<<");
  const YAML::Node& own = node;  // const lookups never insert
  for (const auto& source : sources) {
    for (const auto& item : source) {
      if (!own[item.first.Scalar()].IsDefined()) node[item.first] = item.second;
    }
  }
}

}  // namespace

template <class Error>
void detail::prepare_tree(YAML::Node& root, const std::string& name) {
  std::size_t nodes = 0;
  check_tree<Error>(root, name, 0, nodes);
  apply_merge_keys<Error>(root, name);
}

template void detail::prepare_tree<ConfigError>(YAML::Node&, const std::string&);
template void detail::prepare_tree<UsageError>(YAML::Node&, const std::string&);

YAML::Node detail::parse_config_text(const std::string& text, const std::string& name) {
  try {
    YAML::Node root = detail::load_one_document(text);
    detail::prepare_tree<ConfigError>(root, name);
    if (!root.IsDefined() || root.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!root.IsMap()) {
      throw ConfigError(name + ": expected a mapping of keys at the top level of the config");
    }
    return root;
  } catch (const YAML::Exception& e) {
    std::string where = name;
    if (e.mark.line >= 0) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    throw ConfigError(where + ": malformed YAML: " + e.msg);
  }
}

}  // namespace oml::config
