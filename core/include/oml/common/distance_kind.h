#pragma once
// Which distance the embeddings are compared with: the names PML's losses and miners take as
// `distance:` (docs/models.md#distances-and-miners-of-pmls-losses) and retrieval as
// `retrieval_backend.distance` (docs/metrics.md#distances; there as distances, smaller is closer:
// 1 - cos for cosine, -a.b for dot; oml/retrieval/distance_space.h).
//
//   euclidean          |a - b|                 PML's LpDistance()
//   squared_euclidean  |a - b|^2               PML's LpDistance(power=2)
//   cosine             a.b / (|a| |b|)         PML's CosineSimilarity()
//   dot                a.b                     PML's DotProductSimilarity()
//
// cosine and dot are similarities: larger is closer. Everything that orders items by closeness
// asks `larger_is_closer` once instead of assuming a distance.

#include <optional>
#include <string>
#include <vector>

namespace oml {

enum class DistanceKind { euclidean, squared_euclidean, cosine, dot };

/// The config name of a kind ("squared_euclidean").
std::string to_string(DistanceKind kind);

/// The kind named `name`; nullopt for any other string.
std::optional<DistanceKind> parse_distance_kind(const std::string& name);

/// "euclidean, squared_euclidean, cosine, dot" (for messages).
std::string distance_kind_names();

/// Every kind, in that order.
const std::vector<DistanceKind>& all_distance_kinds();

/// True for the similarities (cosine, dot): the closest item has the largest value.
constexpr bool larger_is_closer(DistanceKind kind) {
  return kind == DistanceKind::cosine || kind == DistanceKind::dot;
}

}  // namespace oml
