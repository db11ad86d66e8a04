#include "oml/losses/distance.h"

#include <torch/torch.h>

#include <algorithm>

#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/losses/criterion.h"
#include "pml_support.h"

namespace oml::losses {

void check_options(const DistanceOptions& o, const std::string& who,
                   const std::vector<DistanceKind>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), o.kind) == allowed.end()) {
    std::string names;
    for (const DistanceKind kind : allowed) names += (names.empty() ? "" : ", ") + to_string(kind);
    config::fail_argument(who, "distance", "distance must be ", allowed.size() == 1 ? "" : "one of ", names,
                          " (as in pytorch-metric-learning), got ", to_string(o.kind));
  }
  config::check_argument(o.kind != DistanceKind::cosine || o.normalize_embeddings, who,
                         "normalize_embeddings",
                         "the cosine distance always normalises the embeddings; use `distance: dot` with "
                         "normalize_embeddings: false for raw inner products");
}

void read_distance(config::ArgsReader& r, DistanceOptions& o) {
  r.custom([&] {
    const config::Node node = r.take("distance");
    if (!node.defined() || node.is_null()) return;
    const auto kind = parse_distance_kind(node.as<std::string>());
    if (!kind)
      node.fail("expected one of " + distance_kind_names() + ", got '" + node.as<std::string>() + "'");
    o.kind = *kind;
  });
  r.optional("normalize_embeddings", o.normalize_embeddings);
}

torch::Tensor Distance::matrix(const torch::Tensor& a, const torch::Tensor& b) const {
  const bool normalize = options_.normalize_embeddings || options_.kind == DistanceKind::cosine;
  const torch::Tensor x = normalize ? detail::unit_rows(a) : a;
  const torch::Tensor y = normalize ? (b.is_same(a) ? x : detail::unit_rows(b)) : b;
  switch (options_.kind) {
    case DistanceKind::euclidean:
      return pairwise_distances(x, y);
    case DistanceKind::squared_euclidean:
      return pairwise_distances(x, y).pow(2);  // PML: LpDistance(power=2), the distance squared
    case DistanceKind::cosine:
    case DistanceKind::dot:
      return torch::mm(x, y.t());
  }
  return {};
}

}  // namespace oml::losses
