#include "oml/retrieval/distance_space.h"

#include <ATen/ATen.h>

#include "oml/common/error.h"

namespace oml::retrieval {

ItemSet to_engine_space(ItemSet items, DistanceKind kind) {
  if (kind == DistanceKind::cosine) {
    // x / max(||x||, 1e-12), as PML's distances (F.normalize) and the losses normalise.
    const at::Tensor rows = items.embeddings.to(at::kFloat);
    items.embeddings = rows / rows.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12);
  }
  return items;
}

double from_engine_distance(double engine_distance, DistanceKind kind) {
  switch (kind) {
    case DistanceKind::squared_euclidean:
      return engine_distance * engine_distance;
    case DistanceKind::cosine:
      // ||a - b||^2 = 2 - 2 cos for unit vectors.
      return engine_distance * engine_distance / 2.0;
    default:  // euclidean, and dot: the engine's -q.g as it is
      return engine_distance;
  }
}

void convert_distances(RetrievalResults& results, DistanceKind kind) {
  if (kind == DistanceKind::euclidean || kind == DistanceKind::dot) return;
  for (float& d : results.distances) d = static_cast<float>(from_engine_distance(d, kind));
}

}  // namespace oml::retrieval
