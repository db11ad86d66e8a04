// The open-set threshold: fnmr@fmr's pair statistics over one labelled set against itself.
#include "oml/metrics/open_set.h"

#include <cmath>

#include "oml/common/error.h"
#include "oml/metrics/detail/pair_statistics.h"
#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::metrics {

OpenSetThreshold calibrate_open_set(const retrieval::ItemSet& items, double fmr, retrieval::Measure measure) {
  OML_CHECK(fmr > 0.0 && fmr < 1.0, UsageError, "the target false match rate must be in (0, 1), got ", fmr);
  retrieval::validate_item_set(items, "calibration set");
  const retrieval::detail::PreparedPair pair(items, items, measure);
  const retrieval::IgnoredPairs ignored(items, items);
  const std::vector<int64_t> n_gt = retrieval::count_ground_truth(items, items, ignored);
  detail::PairStatistics statistics(pair, ignored, items.labels, items.labels, n_gt, {fmr});
  const int64_t n = items.embeddings.size(0);
  const retrieval::BlockShape shape = retrieval::choose_block_shape(n, n, retrieval::KnnOptions{});
  retrieval::detail::for_each_block(pair, shape, {&statistics.first_pass()});
  const std::vector<double> fnmr = statistics.finish(shape);
  OML_CHECK(statistics.num_positive() > 0, DataError,
            "the calibration set has no two items with the same label: no positive pairs to measure fnmr on");
  OML_CHECK(statistics.num_negative() > 0, DataError,
            "the calibration set has a single label: no negative pairs to set the false match rate on");
  OpenSetThreshold out;
  out.fmr = fmr;
  out.threshold = statistics.thresholds().at(0);
  out.fnmr = fnmr.at(0);
  out.positive_pairs = statistics.num_positive();
  out.negative_pairs = statistics.num_negative();
  return out;
}

}  // namespace oml::metrics
