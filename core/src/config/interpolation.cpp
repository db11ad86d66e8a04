// `${a.b.c}` and `${now:FORMAT}` interpolation of a resolved config (document.h).
#include <cstdlib>
#include <ctime>
#include <string>
#include <unordered_map>
#include <vector>

#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "yaml_tree.h"

namespace oml::config {

using detail::is_index;
using detail::to_index;

namespace {

// A chain of references (`a: ${b}`, `b: ${c}`, ...) longer than this is refused: resolving
// it recurses once per link, and no config needs more than a few.
constexpr std::size_t kMaxChain = 100;
// Text that references splice together, summed over the config. `k1: ${k0}${k0}`,
// `k2: ${k1}${k1}`, ... doubles at each line; real configs splice paths and names.
constexpr std::size_t kMaxSplicedText = std::size_t{8} << 20;

std::size_t count_values(const YAML::Node& node) {
  std::size_t n = 1;
  if (node.IsMap()) {
    for (const auto& kv : node) n += count_values(kv.second);
  } else if (node.IsSequence()) {
    for (const auto& item : node) n += count_values(item);
  }
  return n;
}

// Resolution state for ${...} references. Each path is resolved once (`done_`), so a value
// referenced from many places costs one resolution; copies made by whole-value references
// count toward the tree's kMaxNodes, and spliced text toward kMaxSplicedText.
class Interpolator {
 public:
  Interpolator(YAML::Node root, std::shared_ptr<const Origin> origin)
      : root_(std::move(root)), origin_(std::move(origin)) {}

  void run() {
    copied_ = count_values(root_);
    resolve_children(root_, "");
  }

 private:
  static std::string join_path(const std::string& base, const std::string& key) {
    return base.empty() ? key : base + "." + key;
  }

  void resolve_children(YAML::Node node, const std::string& path) {
    if (node.IsMap()) {
      // Through the iterator: `node[key]` searches the mapping, which is quadratic in its size.
      for (const auto& kv : node) {
        YAML::Node slot = kv.second;  // assigning to it replaces the value in the mapping
        slot = resolve(slot, join_path(path, kv.first.Scalar()));
      }
    } else if (node.IsSequence()) {
      std::size_t i = 0;
      for (const auto& item : node) {
        YAML::Node slot = item;
        slot = resolve(slot, join_path(path, std::to_string(i++)));
      }
    }
  }

  // Returns the resolved value of `node` (found at `path`).
  YAML::Node resolve(YAML::Node node, const std::string& path) {
    if (const auto found = done_.find(path); found != done_.end()) return found->second;
    if (!node.IsScalar()) {
      resolve_children(node, path);
      done_.emplace(path, node);
      return node;
    }
    const std::string text = node.Scalar();
    if (text.find("${") == std::string::npos) return node;

    for (const auto& active : stack_) {
      if (active == path) {
        Node(node, path, origin_).fail("circular ${...} reference: " + join(stack_, " -> ") + " -> " + path);
      }
    }
    if (stack_.size() >= kMaxChain) {
      Node(node, path, origin_)
          .fail("${...} references chain more than " + std::to_string(kMaxChain) + " deep, from " +
                stack_.front() + " through " + stack_[1] + ", ..., " + stack_.back() + " to " + path);
    }
    stack_.push_back(path);

    YAML::Node result;
    const std::size_t open = text.find("${");
    const std::size_t close = text.find('}', open);
    if (open == 0 && close == text.size() - 1 && text.find("${", 2) == std::string::npos) {
      // The whole value is one reference: take the referenced node with its type.
      result = YAML::Clone(lookup(node, path, text.substr(2, close - 2)));
      if (!result.IsScalar()) {
        copied_ += count_values(result);
        if (copied_ > detail::kMaxNodes) {
          Node(node, path, origin_)
              .fail("${...} references copy the config past " + std::to_string(detail::kMaxNodes) +
                    " values");
        }
      }
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
        spliced_ += target.Scalar().size();
        if (spliced_ > kMaxSplicedText) {
          Node(node, path, origin_)
              .fail("${...} references splice more than " + std::to_string(kMaxSplicedText >> 20) +
                    " MiB of text into the config");
        }
        out += target.Scalar();
        pos = end + 1;
      }
      out += text.substr(pos);
      result = YAML::Node(out);
    }
    stack_.pop_back();
    done_.emplace(path, result);
    return result;
  }

  YAML::Node lookup(const YAML::Node& from, const std::string& from_path, const std::string& ref) {
    const std::string key = trim(ref);
    if (key.rfind("now:", 0) == 0) return YAML::Node(format_now(from, from_path, key.substr(4)));
    YAML::Node target = find_path(root_, key);
    if (!target.IsDefined()) {
      Node(from, from_path, origin_).fail("${" + key + "} refers to a key that does not exist");
    }
    // The referenced value may itself contain references: resolve it first.
    return resolve(target, key);
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
  std::vector<std::string> stack_;                    ///< the references being resolved
  std::unordered_map<std::string, YAML::Node> done_;  ///< resolved values by key path
  std::size_t copied_ = 0;                            ///< values in the tree and its copies
  std::size_t spliced_ = 0;                           ///< characters of spliced text
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
