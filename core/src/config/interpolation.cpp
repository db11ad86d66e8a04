// `${a.b.c}` and `${now:FORMAT}` interpolation of a resolved config (document.h).
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "yaml_tree.h"

namespace oml::config {

using detail::is_index;
using detail::to_index;

namespace {

// Resolution state for ${...} references.
class Interpolator {
 public:
  Interpolator(YAML::Node root, std::shared_ptr<const Origin> origin)
      : root_(std::move(root)), origin_(std::move(origin)) {}

  void run() { resolve_children(root_, ""); }

 private:
  static std::string join_path(const std::string& base, const std::string& key) {
    return base.empty() ? key : base + "." + key;
  }

  void resolve_children(YAML::Node node, const std::string& path) {
    if (node.IsMap()) {
      std::vector<std::string> keys;
      for (const auto& kv : node) keys.push_back(kv.first.Scalar());
      for (const auto& key : keys) node[key] = resolve(node[key], join_path(path, key));
    } else if (node.IsSequence()) {
      for (std::size_t i = 0; i < node.size(); ++i) {
        node[i] = resolve(node[i], join_path(path, std::to_string(i)));
      }
    }
  }

  // Returns the resolved value of `node` (found at `path`).
  YAML::Node resolve(YAML::Node node, const std::string& path) {
    if (!node.IsScalar()) {
      resolve_children(node, path);
      return node;
    }
    const std::string text = node.Scalar();
    if (text.find("${") == std::string::npos) return node;

    for (const auto& active : stack_) {
      if (active == path) {
        Node(node, path, origin_).fail("circular ${...} reference: " + join(stack_, " -> ") + " -> " + path);
      }
    }
    stack_.push_back(path);

    YAML::Node result;
    const std::size_t open = text.find("${");
    const std::size_t close = text.find('}', open);
    if (open == 0 && close == text.size() - 1 && text.find("${", 2) == std::string::npos) {
      // The whole value is one reference: take the referenced node with its type.
      result = YAML::Clone(lookup(node, path, text.substr(2, close - 2)));
    } else {
      std::string out;
      std::size_t pos = 0;
      while (true) {
        const std::size_t start = text.find("${", pos);
        if (start == std::string::npos) break;
        const std::size_t end = text.find('}', start);
        if (end == std::string::npos) {
          Node(node, path, origin_).fail("unterminated ${...} in '" + text + "'");
        }
        out += text.substr(pos, start - pos);
        YAML::Node target = lookup(node, path, text.substr(start + 2, end - start - 2));
        if (!target.IsScalar()) {
          Node(node, path, origin_)
              .fail("${" + text.substr(start + 2, end - start - 2) +
                    "} is not a scalar and cannot be spliced into text");
        }
        out += target.Scalar();
        pos = end + 1;
      }
      out += text.substr(pos);
      result = YAML::Node(out);
    }
    stack_.pop_back();
    return result;
  }

  YAML::Node lookup(const YAML::Node& from, const std::string& from_path, const std::string& ref) {
    const std::string key = trim(ref);
    if (key.rfind("now:", 0) == 0) return YAML::Node(format_now(from, from_path, key.substr(4)));
    YAML::Node target = find_path(root_, key);
    if (!target.IsDefined()) {
      Node(from, from_path, origin_).fail("${" + key + "} refers to a key that does not exist");
    }
    // The referenced value may itself contain references: resolve it in place first.
    YAML::Node resolved = resolve(target, key);
    return resolved;
  }

  // Hydra's `now` resolver: ${now:%Y-%m-%d_%H-%M-%S}.
  std::string format_now(const YAML::Node& from, const std::string& from_path, const std::string& format) {
    if (format.empty())
      Node(from, from_path, origin_).fail("${now:} needs a strftime format, e.g. ${now:%Y-%m-%d}");
    const std::time_t start = run_start_time();
    std::tm local{};
    localtime_r(&start, &local);
    char text[256];
    const std::size_t n = std::strftime(text, sizeof(text), format.c_str(), &local);
    if (n == 0) {
      Node(from, from_path, origin_)
          .fail("${now:" + format + "} formats to nothing (or more than 255 characters)");
    }
    return std::string(text, n);
  }

  YAML::Node root_;
  std::shared_ptr<const Origin> origin_;
  std::vector<std::string> stack_;
};

}  // namespace

std::time_t run_start_time() {
  static const std::time_t start = [] {
    if (const char* given = std::getenv(kRunStartTimeVariable)) {
      char* end = nullptr;
      const long long seconds = std::strtoll(given, &end, 10);
      if (end != given && *end == '\0' && seconds > 0) return static_cast<std::time_t>(seconds);
    }
    return std::time(nullptr);
  }();
  return start;
}

YAML::Node find_path(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = root;  // shares identity with root's nodes
  for (const auto& part : split(path, '.')) {
    if (cur.IsMap()) {
      const YAML::Node& c = cur;
      YAML::Node next = c[part];
      if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
      cur.reset(next);
    } else if (cur.IsSequence() && is_index(part)) {
      const std::size_t i = to_index(part);
      if (i >= cur.size()) return YAML::Node(YAML::NodeType::Undefined);
      YAML::Node next = cur[i];
      cur.reset(next);
    } else {
      return YAML::Node(YAML::NodeType::Undefined);
    }
  }
  return cur;
}

void resolve_interpolations(YAML::Node& root, const std::shared_ptr<const Origin>& origin) {
  Interpolator(root, origin).run();
}

}  // namespace oml::config
