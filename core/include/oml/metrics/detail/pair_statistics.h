#pragma once
// Internal: fnmr@fmr over every non-ignored (query, gallery) pair in bounded memory.
//
// The negative-pair distances are never stored. Pass 1 (shared with the k-NN retrieval)
// histograms them; the two ranks each quantile needs are then located in their histogram
// bins, refined by further histogram passes while a bin is too full, and the values of those
// bins are collected exactly in a last pass. Positive distances are kept in memory when they
// fit (sum of n_gt <= positive_cap), otherwise counted in one more pass once T is known.

#include <cstdint>
#include <memory>
#include <vector>

#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::metrics::detail {

struct PairStatisticsOptions {
  int64_t bins = 1 << 18;             ///< histogram bins per pass
  int64_t collect_cap = 1 << 23;      ///< most negative distances collected in the exact pass
  int64_t positive_cap = 1 << 25;     ///< most positive distances kept in memory
};

class PairStatistics {
 public:
  PairStatistics(const retrieval::detail::PreparedPair& pair, const retrieval::IgnoredPairs& ignored,
                 const std::vector<int64_t>& query_labels, const std::vector<int64_t>& gallery_labels,
                 const std::vector<int64_t>& n_gt, std::vector<double> fmr_vals,
                 PairStatisticsOptions options = {});
  ~PairStatistics();

  /// The consumer of pass 1; run it over every block (e.g. fused with the retrieval).
  retrieval::detail::BlockConsumer& first_pass();

  /// Runs the remaining passes with blocks of `shape` and returns fnmr per fmr value (NaN when
  /// there are no positive or no negative pairs).
  std::vector<double> finish(const retrieval::BlockShape& shape);

  int64_t num_positive() const { return num_positive_; }
  int64_t num_negative() const { return num_negative_; }
  /// Passes over all pairs made so far (pass 1 included) — for tests and logs.
  int passes() const { return passes_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t num_positive_ = 0;
  int64_t num_negative_ = 0;
  int passes_ = 0;
};

}  // namespace oml::metrics::detail
