#pragma once
// Open-set answers: the distance beyond which a query's nearest gallery item is "unknown",
// chosen on a labelled set for a target false match rate (docs/serving.md#calibration).
//
//   OpenSetThreshold t = calibrate_open_set(validation_items, /*fmr=*/1e-3);
//   // a query whose nearest item is farther than t.threshold is unknown; at t.threshold a
//   // share t.fnmr of same-label pairs is rejected
//
// Over every ordered pair of different items of the set (ignored pairs as in retrieval: the
// item itself, its sequence), same-label pairs are positive, others negative: T is the
// fmr-quantile of the negative distances and fnmr the share of positives at or above it —
// fnmr@fmr's T and value (docs/metrics.md#fnmrfmr), computed exactly in bounded memory.

#include <cstdint>

#include "oml/retrieval/knn.h"

namespace oml::metrics {

struct OpenSetThreshold {
  double fmr = 0.0;        ///< the target false match rate
  double threshold = 0.0;  ///< the distance T
  double fnmr = 0.0;       ///< the false non-match rate at T on the calibration set
  int64_t positive_pairs = 0;
  int64_t negative_pairs = 0;
};

/// T for `fmr` in (0, 1) over the pairs of `items` (labels required), as a distance of `measure`
/// (Euclidean, or -q.g). DataError when the set has no positive or no negative pairs; UsageError
/// for fmr outside (0, 1).
OpenSetThreshold calibrate_open_set(const retrieval::ItemSet& items, double fmr,
                                    retrieval::Measure measure = retrieval::Measure::euclidean);

}  // namespace oml::metrics
