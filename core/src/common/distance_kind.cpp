#include "oml/common/distance_kind.h"

#include <array>
#include <utility>

namespace oml {
namespace {

constexpr std::array<std::pair<DistanceKind, const char*>, 4> kNames{{
    {DistanceKind::euclidean, "euclidean"},
    {DistanceKind::squared_euclidean, "squared_euclidean"},
    {DistanceKind::cosine, "cosine"},
    {DistanceKind::dot, "dot"},
}};

}  // namespace

std::string to_string(DistanceKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<DistanceKind> parse_distance_kind(const std::string& name) {
  for (const auto& [k, n] : kNames) {
    if (name == n) return k;
  }
  return std::nullopt;
}

const std::vector<DistanceKind>& all_distance_kinds() {
  static const std::vector<DistanceKind> kinds = [] {
    std::vector<DistanceKind> out;
    for (const auto& [kind, name] : kNames) out.push_back(kind);
    return out;
  }();
  return kinds;
}

std::string distance_kind_names() {
  std::string out;
  for (const auto& [k, name] : kNames) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace oml
