#pragma once
// Retrieval under a distance other than the Euclidean one (`retrieval_backend: {distance: cosine}`,
// docs/metrics.md#distances), done by the Euclidean engines — exact k-NN and every Faiss backend —
// on vectors whose Euclidean order is the distance's order, so that each engine, its exactness
// and its recall stay as they are:
//
//   euclidean          ||q - g||            the vectors as they are
//   squared_euclidean  ||q - g||^2          the vectors as they are; a distance d reported as d^2
//   cosine             1 - cos(q, g)        rows L2-normalised first (float32, PML's F.normalize);
//                                           d reported as d^2 / 2, the cosine distance
//
// Every retrieval result is converted once, right after the search: postprocessors, metrics,
// thresholds, reports and outputs all read the configured distance, smaller is closer. `dot` (an
// inner product: larger is closer, and no transform of the vectors alone gives its order to a
// Euclidean engine) is for the losses only; a config that asks retrieval for it is refused.

#include "oml/common/distance_kind.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::retrieval {

/// `items` as the engines search them under `kind`: for cosine a copy with unit rows (a zero row
/// stays zero); otherwise `items` itself.
ItemSet to_engine_space(ItemSet items, DistanceKind kind);

/// An engine's Euclidean distance as `kind`'s value (monotone, so a threshold found in the
/// engine's space, e.g. by calibration, maps to the same cut in `kind`'s units).
double from_engine_distance(double euclidean, DistanceKind kind);

/// Every distance of `results` (an engine's, Euclidean) as `kind`'s value.
void convert_distances(RetrievalResults& results, DistanceKind kind);

}  // namespace oml::retrieval
