#pragma once
// Internal to fnmr@fmr (oml/metrics/detail/pair_statistics.h): the pairs it counts and how every
// pass over them sees each one. PairStatistics runs pass 1 with WindowScan (window_scan.h) or a
// level-0 histogram, and any further passes through PairScan::pass; HistogramRefinement
// (histogram_refinement.h) locates the quantile ranks when the windows miss.
//
// Every pass must see the very same float value for a pair, whichever algorithm reads it:
// squared_distance() is that value, computed from the engine's block entry.

#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::metrics::detail {

/// The squared distance of one pair from its block entry (-2 q.g), its query's and its
/// gallery item's squared norms. The expansion may round a zero distance below zero: clamped.
/// Under negative_dot the same sum is R - q.g (distance_blocks.h): PreparedPair::distance_of_value
/// turns either into the pair's distance.
inline float squared_distance(float query_norm2, float block_value, float gallery_norm2) {
  const float d2 = query_norm2 + (block_value + gallery_norm2);
  return d2 < 0.0f ? 0.0f : d2;
}

/// The squared distances at the two ranks a quantile interpolates between.
struct RankValues {
  double lower = 0.0;
  double upper = 0.0;
};

/// The positive pairs' squared distances, kept per thread by pass 1 when they fit in memory
/// (otherwise counted in a pass of their own once the thresholds are known).
struct KeptPositives {
  bool keep = false;
  std::vector<std::vector<float>> per_thread;
};

/// Every non-ignored (query, gallery) pair, visited block by block with its label relation.
class PairScan {
 public:
  PairScan(const retrieval::detail::PreparedPair& pair, const retrieval::IgnoredPairs& ignored,
           const std::vector<int64_t>& query_labels, const std::vector<int64_t>& gallery_labels);

  const retrieval::detail::PreparedPair& pair() const { return pair_; }
  const retrieval::IgnoredPairs& ignored() const { return ignored_; }
  const std::vector<int64_t>& query_labels() const { return query_labels_; }
  const std::vector<int64_t>& gallery_labels() const { return gallery_labels_; }
  /// Threads the visits may run on: per-thread results need this many slots.
  int threads() const { return threads_; }
  /// Full passes made through pass() so far.
  int passes() const { return passes_; }

  /// Calls fn(thread, squared_distance, is_positive) for every non-ignored pair of one block
  /// (rows q0..q1, columns g0..g1 of -2 q.g), rows spread over threads.
  template <class Fn>
  void visit(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block, Fn&& fn) const;

  /// One more full pass: visit() over every block of `shape`.
  template <class Fn>
  void pass(const retrieval::BlockShape& shape, Fn&& fn);

 private:
  const retrieval::detail::PreparedPair& pair_;
  const retrieval::IgnoredPairs& ignored_;
  const std::vector<int64_t>& query_labels_;
  const std::vector<int64_t>& gallery_labels_;
  int threads_ = 1;
  int passes_ = 0;
};

template <class Fn>
void PairScan::visit(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block, Fn&& fn) const {
  const int64_t width = g1 - g0;
  const float* norms = pair_.gallery_norm2.data() + g0;
  const int64_t* labels = gallery_labels_.data() + g0;
  const int64_t* sequences =
      ignored_.gallery_sequences().empty() ? nullptr : ignored_.gallery_sequences().data() + g0;
  at::parallel_for(0, q1 - q0, 8, [&](int64_t begin, int64_t end) {
    const int thread = at::get_thread_num();
    for (int64_t i = begin; i < end; ++i) {
      const int64_t q = q0 + i;
      const float* row = block + i * width;
      const float query_norm2 = pair_.query_norm2[q];
      const int64_t label = query_labels_[q];
      const int64_t self = ignored_.self_position(q) - g0;
      const int64_t sequence = ignored_.query_sequence(q);
      const bool check_sequence = sequences != nullptr && sequence >= 0;
      for (int64_t j = 0; j < width; ++j) {
        if (j == self || (check_sequence && sequences[j] == sequence)) continue;
        fn(thread, static_cast<double>(squared_distance(query_norm2, row[j], norms[j])), labels[j] == label);
      }
    }
  });
}

template <class Fn>
void PairScan::pass(const retrieval::BlockShape& shape, Fn&& fn) {
  struct Visitor final : retrieval::detail::BlockConsumer {
    const PairScan& scan;
    Fn& fn;
    Visitor(const PairScan& s, Fn& f) : scan(s), fn(f) {}
    void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override {
      scan.visit(q0, q1, g0, g1, block, fn);
    }
  } visitor(*this, fn);
  retrieval::detail::for_each_block(pair_, shape, {&visitor});
  ++passes_;
}

}  // namespace oml::metrics::detail
