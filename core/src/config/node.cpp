#include "oml/config/node.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "oml/common/strings.h"

namespace oml::config {

namespace {
const Origin& empty_origin() {
  static const Origin origin{"<config>", {}, {}, {}};
  return origin;
}

bool contains(const YAML::Node& tree, const YAML::Node& node) {
  if (tree.is(node)) return true;
  if (tree.IsMap()) {
    for (const auto& item : tree) {
      if (item.first.is(node) || contains(item.second, node)) return true;
    }
  } else if (tree.IsSequence()) {
    for (const auto& item : tree) {
      if (contains(item, node)) return true;
    }
  }
  return false;
}

/// "a.b[1].c" as `--set` spells it: "a.b.1.c".
std::string as_set_path(const std::string& path) {
  std::string out;
  out.reserve(path.size() + 2);
  for (const char c : path) {
    if (c == '[') {
      out += '.';
    } else if (c != ']') {
      out += c;
    }
  }
  return out;
}

/// The file `node` was read from: an option file that `defaults:` composed in, else the config.
const std::string& file_of(const Origin& origin, const YAML::Node& node) {
  for (const auto& [file, tree] : origin.composed_files) {
    if (contains(tree, node)) return file;
  }
  return origin.file;
}
}  // namespace

Node::Node(YAML::Node yaml, std::string key_path, std::shared_ptr<const Origin> origin)
    // yaml-cpp returns "zombie" nodes for absent keys, on which everything but IsDefined()
    // throws; a plain undefined node behaves.
    : yaml_(yaml.IsDefined() ? yaml : YAML::Node(YAML::NodeType::Undefined)),
      path_(std::move(key_path)),
      origin_(std::move(origin)) {}

const std::string& Node::file() const { return (origin_ ? *origin_ : empty_origin()).file; }

std::string Node::where() const {
  const Origin& origin = origin_ ? *origin_ : empty_origin();
  // A value set on the command line (or anything below it, list items too) points at the flag.
  const std::string set_path = as_set_path(path_);
  for (const auto& key : origin.overridden) {
    if (set_path == key || starts_with(set_path, key + ".")) return "--set " + key;
  }
  if (const auto created = origin.created_by.find(path_); created != origin.created_by.end()) {
    return "--set " + created->second;
  }
  if (yaml_.IsDefined()) {
    const YAML::Mark mark = yaml_.Mark();
    if (mark.line >= 0) {
      return file_of(origin, yaml_) + ":" + std::to_string(mark.line + 1) + ":" +
             std::to_string(mark.column + 1);
    }
  }
  return origin.file;
}

std::string Node::describe() const { return path_.empty() ? where() : where() + ": " + path_; }

void Node::fail(const std::string& message) const { throw ConfigError(describe() + ": " + message); }

std::string Node::child_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

Node Node::operator[](const std::string& key) const {
  if (!is_map()) {
    if (is_null()) return Node(YAML::Node(YAML::NodeType::Undefined), child_path(key), origin_);
    fail("expected a mapping with key '" + key + "'");
  }
  // const access on YAML::Node never inserts.
  const YAML::Node& self = yaml_;
  return Node(self[key], child_path(key), origin_);
}

Node Node::operator[](std::size_t index) const {
  if (!is_sequence()) fail("expected a list");
  if (index >= size()) fail("index " + std::to_string(index) + " out of range");
  const YAML::Node& self = yaml_;
  return Node(self[index], path_ + "[" + std::to_string(index) + "]", origin_);
}

Node Node::key_node(const std::string& key) const {
  if (is_map()) {
    for (const auto& kv : yaml_) {
      if (kv.first.Scalar() == key) return Node(kv.first, child_path(key), origin_);
    }
  }
  return (*this)[key];
}

std::vector<std::string> Node::keys() const {
  std::vector<std::string> out;
  if (!is_map()) return out;
  for (const auto& kv : yaml_) out.push_back(kv.first.Scalar());
  return out;
}

namespace detail {

namespace {
std::string scalar_text(const Node& node, const char* expected) {
  if (!node.defined()) node.fail(std::string("missing value, expected ") + expected);
  if (!node.is_scalar()) {
    node.fail(std::string("expected ") + expected + ", got a " +
              (node.is_map()        ? "mapping"
               : node.is_sequence() ? "list"
                                    : "null"));
  }
  return node.yaml().Scalar();
}
}  // namespace

bool scalar_to_bool(const Node& node) {
  // YAML 1.1's booleans, as PyYAML (and so OmegaConf, which reads OML's configs) resolves them.
  const std::string text = scalar_text(node, "true or false");
  static const std::vector<std::string> yes{"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::vector<std::string> no{"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  for (const auto& y : yes)
    if (text == y) return true;
  for (const auto& n : no)
    if (text == n) return false;
  node.fail("expected true or false, got '" + text + "'");
}

namespace {

bool all_of(const std::string& text, std::size_t from, const char* allowed) {
  return from < text.size() && text.find_first_not_of(allowed, from) == std::string::npos;
}

}  // namespace

bool is_yaml_integer(const std::string& text) {
  const std::size_t at = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (text.compare(at, 2, "0x") == 0) return all_of(text, at + 2, "0123456789abcdefABCDEF_");
  if (text.compare(at, 2, "0b") == 0) return all_of(text, at + 2, "01_");
  return at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) &&
         all_of(text, at, "0123456789_");
}

namespace {

// The value of an is_yaml_integer text; fails at `node` when it does not fit in int64, or when
// it is written with a leading zero: YAML 1.1 (PyYAML, OmegaConf) reads 010 as octal 8 and YAML
// 1.2 as decimal 10, and a config that means one number to OML and another here is refused rather
// than read one way silently.
int64_t yaml_integer_value(const Node& node, const std::string& text) {
  const bool negative = text[0] == '-';
  const std::size_t at = text[0] == '-' || text[0] == '+' ? 1 : 0;
  int base = 10;
  std::size_t from = at;
  if (text.compare(at, 2, "0x") == 0) {
    base = 16;
    from += 2;
  } else if (text.compare(at, 2, "0b") == 0) {
    base = 2;
    from += 2;
  }
  std::string digits;
  for (std::size_t i = from; i < text.size(); ++i)
    if (text[i] != '_') digits += text[i];
  if (digits.empty()) node.fail("expected an integer, got '" + text + "'");
  if (base == 10 && digits.size() > 1 && digits[0] == '0' &&
      digits.find_first_not_of('0') != std::string::npos) {
    const std::string significant = digits.substr(digits.find_first_not_of('0'));
    const std::string sign = negative ? "-" : "";
    std::string yaml11 = "as text";  // 08 and 09 are no octal numbers
    if (significant.find_first_of("89") == std::string::npos) {
      errno = 0;
      const unsigned long long octal = std::strtoull(significant.c_str(), nullptr, 8);
      yaml11 = errno == ERANGE ? "as an octal number" : "as the octal number " + sign + std::to_string(octal);
    }
    // YAML 1.2's core schema has no '_' in integers: 0_5 is text there.
    const std::string yaml12 =
        text.find('_') != std::string::npos ? std::string("as text") : "as " + sign + significant;
    node.fail("got '" + text +
              "', an integer with a leading zero, which YAML 1.1 (OmegaConf, so OML) reads " + yaml11 +
              " and YAML 1.2 " + yaml12 + ": write it without the leading zero");
  }
  errno = 0;
  const unsigned long long magnitude = std::strtoull(digits.c_str(), nullptr, base);
  const auto limit =
      static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
  if (errno == ERANGE || magnitude > limit) node.fail("integer '" + text + "' is out of range");
  if (!negative) return static_cast<int64_t>(magnitude);
  return magnitude == limit ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(magnitude);
}

}  // namespace

int64_t scalar_to_int(const Node& node) {
  const std::string text = scalar_text(node, "an integer");
  if (!is_yaml_integer(text)) node.fail("expected an integer, got '" + text + "'");
  return yaml_integer_value(node, text);
}

double scalar_to_double(const Node& node) {
  const std::string text = scalar_text(node, "a number");
  if (text == ".nan" || text == ".NaN" || text == ".NAN" || text == "nan") return std::nan("");
  if (text == ".inf" || text == ".Inf" || text == ".INF" || text == "inf" || text == "+.inf" ||
      text == "+.Inf" || text == "+.INF") {
    return HUGE_VAL;
  }
  if (text == "-.inf" || text == "-.Inf" || text == "-.INF" || text == "-inf") return -HUGE_VAL;
  // An integer where a number is expected is read as YAML reads integers (1_000, 0x10; 010 is
  // refused); plain decimals go to strtod, which also takes those past int64.
  if (is_yaml_integer(text)) {
    const std::size_t at = text[0] == '-' || text[0] == '+' ? 1 : 0;
    const bool leading_zero = text[at] == '0' && text.size() > at + 1;
    if (leading_zero || text.find('_') != std::string::npos) {
      return static_cast<double>(yaml_integer_value(node, text));
    }
  }
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    node.fail("expected a number, got '" + text + "'");
  }
  return value;
}

std::string scalar_to_string(const Node& node) { return scalar_text(node, "a string"); }

}  // namespace detail
}  // namespace oml::config
