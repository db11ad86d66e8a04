#pragma once
// The distance a PML loss or miner compares embeddings with (`distance:` and
// `normalize_embeddings:` in its args), as PML's distance objects compute it:
//
//   criterion: {name: contrastive, args: {distance: cosine, pos_margin: 1, neg_margin: 0}}
//
// `normalize_embeddings` (PML's default: true) L2-normalises both sides first; cosine always does.
// A loss written for distances reads a similarity the other way round through margin() and
// closeness(), as PML's `is_inverted` does — the one place where "larger is closer" is handled.

#include <torch/types.h>

#include <string>
#include <vector>

#include "oml/common/distance_kind.h"

namespace oml::config {
class ArgsReader;
}

namespace oml::losses {

struct DistanceOptions {
  DistanceKind kind = DistanceKind::euclidean;
  bool normalize_embeddings = true;
};

/// config::ArgumentError when `kind` is not in `allowed` (a loss that PML ties to one distance,
/// e.g. circle to cosine) or cosine is asked for without normalisation. `who` names the owner
/// ("loss 'contrastive'").
void check_options(const DistanceOptions& options, const std::string& who,
                   const std::vector<DistanceKind>& allowed = all_distance_kinds());

/// Reads `distance` and `normalize_embeddings` over the defaults in `options` (a name outside
/// distance_kind_names() is a ConfigError at the key); the owner's check calls check_options.
void read_distance(config::ArgsReader& reader, DistanceOptions& options);

/// PML's distance objects (LpDistance, CosineSimilarity, DotProductSimilarity) on [N, D] rows.
class Distance {
 public:
  explicit Distance(DistanceOptions options = {}) : options_(options) {}

  /// Every row of `a` against every row of `b` ([Na, Nb]): distances, or similarities for cosine
  /// and dot. Differentiable; Euclidean has a zero (not NaN) gradient where a distance is 0.
  torch::Tensor matrix(const torch::Tensor& a, const torch::Tensor& b) const;

  /// PML's is_inverted: the values are similarities.
  bool larger_is_closer() const { return oml::larger_is_closer(options_.kind); }
  /// PML's margin(x, y): by how much x is farther than y (x - y for distances, y - x for similarities).
  torch::Tensor margin(const torch::Tensor& x, const torch::Tensor& y) const {
    return larger_is_closer() ? y - x : x - y;
  }
  torch::Tensor margin(const torch::Tensor& x, double y) const { return larger_is_closer() ? y - x : x - y; }
  torch::Tensor margin(double x, const torch::Tensor& y) const { return larger_is_closer() ? y - x : x - y; }
  /// The values with "larger is closer" whatever the kind (distances negated), as PML's softmax
  /// losses use them.
  torch::Tensor closeness(const torch::Tensor& values) const { return larger_is_closer() ? values : -values; }
  const DistanceOptions& options() const { return options_; }

 private:
  DistanceOptions options_;
};

}  // namespace oml::losses
