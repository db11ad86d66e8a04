#pragma once
// Retrieval under each `retrieval_backend: {distance: ...}` (docs/metrics.md#distances). The
// engines — exact k-NN and every Faiss backend — know two measures (knn.h's Measure): Euclidean,
// and the negated inner product. Every distance maps to one of them, so each engine, its
// exactness and its recall stay as they are:
//
//   euclidean          ||q - g||            Euclidean on the vectors as they are
//   squared_euclidean  ||q - g||^2          Euclidean on the vectors as they are; d reported as d^2
//   cosine             1 - cos(q, g)        Euclidean on rows L2-normalised first (float32, PML's
//                                           F.normalize); d reported as d^2 / 2, the cosine distance
//   dot                -q.g                 the inner-product measure on the vectors as they are
//                                           (exact k-NN's blocks of -q.g, Faiss's inner-product
//                                           indexes); reported as it is: the negated similarity
//
// Every retrieval result is converted once, right after the search: postprocessors, metrics,
// thresholds, reports and outputs all read the configured distance, smaller is closer (for dot
// a distance may be negative).

#include "oml/common/distance_kind.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval {

/// The measure the engines search `kind` with (KnnOptions::measure).
constexpr Measure engine_measure(DistanceKind kind) {
  return kind == DistanceKind::dot ? Measure::negative_dot : Measure::euclidean;
}

/// `items` as the engines search them under `kind`: for cosine a copy with unit rows (a zero row
/// stays zero); otherwise `items` itself.
ItemSet to_engine_space(ItemSet items, DistanceKind kind);

/// An engine's distance (Euclidean, or -q.g for dot) as `kind`'s value (monotone, so a threshold
/// found in the engine's space, e.g. by calibration, maps to the same cut in `kind`'s units).
double from_engine_distance(double engine_distance, DistanceKind kind);

/// Every distance of `results` (the engine's) as `kind`'s value.
void convert_distances(RetrievalResults& results, DistanceKind kind);

}  // namespace oml::retrieval
