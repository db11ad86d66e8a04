#include "oml/metrics/detail/pair_statistics.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "oml/common/error.h"
#include "oml/metrics/fnmr.h"

namespace oml::metrics::detail {

namespace {

using retrieval::BlockShape;
using retrieval::IgnoredPairs;
using retrieval::detail::BlockConsumer;
using retrieval::detail::PreparedPair;

// One histogram level: `bins` bins of width 1 / inv starting at lo. Values outside fall into
// the first or last bin, so every value has exactly one bin at every level and membership of
// a nested cell is decided by the same arithmetic in every pass.
struct Level {
  double lo = 0.0;
  double inv = 1.0;
  int64_t bins = 1;
  int64_t index = 0;

  int64_t bin_of(double value) const {
    const double x = (value - lo) * inv;
    if (!(x >= 0.0)) return 0;
    if (x >= static_cast<double>(bins)) return bins - 1;
    return std::min<int64_t>(static_cast<int64_t>(x), bins - 1);
  }
  // The next level splitting this level's chosen bin.
  Level child(int64_t child_bins) const {
    return Level{lo + static_cast<double>(index) / inv, inv * static_cast<double>(child_bins), child_bins, 0};
  }
};

// Whether `value`, whose level-0 bin is `bin0`, lies in the cell `chain` describes.
bool in_cell(const std::vector<Level>& chain, int64_t bin0, double value) {
  if (chain.front().index != bin0) return false;
  for (std::size_t i = 1; i < chain.size(); ++i) {
    if (chain[i].bin_of(value) != chain[i].index) return false;
  }
  return true;
}

// A rank among the sorted negative distances that a quantile needs, and the histogram cell
// known to hold it: `below` negatives lie in earlier cells, `count` in this one.
struct Target {
  int64_t rank = 0;
  std::vector<Level> chain;
  int64_t below = 0;
  int64_t count = 0;
  double value = 0.0;  // squared distance at `rank`, once collected
};

bool same_cell(const Target& a, const Target& b) {
  if (a.chain.size() != b.chain.size()) return false;
  for (std::size_t i = 0; i < a.chain.size(); ++i) {
    if (a.chain[i].index != b.chain[i].index) return false;
  }
  return true;
}

// Calls fn(thread, squared_distance, is_positive) for every non-ignored pair of the block.
template <class Fn>
void visit_pairs(const PreparedPair& pair, const IgnoredPairs& ignored, const std::vector<int64_t>& query_labels,
                 const std::vector<int64_t>& gallery_labels, int64_t q0, int64_t q1, int64_t g0, int64_t g1,
                 const float* block, Fn&& fn) {
  const int64_t width = g1 - g0;
  const float* norms = pair.gallery_norm2.data() + g0;
  const int64_t* labels = gallery_labels.data() + g0;
  const int64_t* sequences = ignored.gallery_sequences().empty() ? nullptr : ignored.gallery_sequences().data() + g0;
  at::parallel_for(0, q1 - q0, 8, [&](int64_t begin, int64_t end) {
    const int thread = at::get_thread_num();
    for (int64_t i = begin; i < end; ++i) {
      const int64_t q = q0 + i;
      const float* row = block + i * width;
      const float query_norm2 = pair.query_norm2[q];
      const int64_t label = query_labels[q];
      const int64_t self = ignored.self_position(q) - g0;
      const int64_t sequence = ignored.query_sequence(q);
      const bool check_sequence = sequences != nullptr && sequence >= 0;
      for (int64_t j = 0; j < width; ++j) {
        if (j == self || (check_sequence && sequences[j] == sequence)) continue;
        float d2 = query_norm2 + (row[j] + norms[j]);
        if (d2 < 0.0f) d2 = 0.0f;  // the expansion may round a zero distance below zero
        fn(thread, static_cast<double>(d2), labels[j] == label);
      }
    }
  });
}

}  // namespace

struct PairStatistics::Impl {
  const PreparedPair& pair;
  const IgnoredPairs& ignored;
  const std::vector<int64_t>& query_labels;
  const std::vector<int64_t>& gallery_labels;
  std::vector<double> fmr_vals;
  PairStatisticsOptions options;
  int threads = 1;

  Level level0;
  std::vector<std::vector<int64_t>> histogram0;  // per thread
  bool keep_positives = false;
  std::vector<std::vector<float>> positives;  // per thread, squared distances

  // Pass 1: level-0 histogram of negatives; positives kept when they fit.
  class FirstPass final : public BlockConsumer {
   public:
    explicit FirstPass(Impl& impl) : impl_(impl) {}
    void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override {
      Impl& s = impl_;
      visit_pairs(s.pair, s.ignored, s.query_labels, s.gallery_labels, q0, q1, g0, g1, block,
                  [&s](int thread, double d2, bool positive) {
                    if (positive) {
                      if (s.keep_positives) s.positives[thread].push_back(static_cast<float>(d2));
                    } else {
                      ++s.histogram0[thread][s.level0.bin_of(d2)];
                    }
                  });
    }

   private:
    Impl& impl_;
  };
  FirstPass first{*this};

  Impl(const PreparedPair& p, const IgnoredPairs& i, const std::vector<int64_t>& ql, const std::vector<int64_t>& gl,
       std::vector<double> fmr, PairStatisticsOptions o)
      : pair(p), ignored(i), query_labels(ql), gallery_labels(gl), fmr_vals(std::move(fmr)), options(o) {
    threads = std::max(1, at::get_num_threads());
    double max_query_norm = 0.0;
    for (const double n : pair.query_norm) max_query_norm = std::max(max_query_norm, n);
    const double reach = max_query_norm + pair.gallery_max_norm;
    const double top = reach * reach * (1.0 + 1e-5) + 1e-30;
    level0 = Level{0.0, static_cast<double>(options.bins) / top, options.bins, 0};
    histogram0.assign(threads, std::vector<int64_t>(static_cast<std::size_t>(options.bins), 0));
    positives.resize(threads);
  }

  // Runs `fn(thread, d2, positive)` over every pair, one more full pass.
  template <class Fn>
  void pass(const BlockShape& shape, Fn&& fn) {
    struct Visitor final : BlockConsumer {
      Impl& s;
      Fn& fn;
      Visitor(Impl& impl, Fn& f) : s(impl), fn(f) {}
      void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override {
        visit_pairs(s.pair, s.ignored, s.query_labels, s.gallery_labels, q0, q1, g0, g1, block, fn);
      }
    } visitor(*this, fn);
    retrieval::detail::for_each_block(pair, shape, {&visitor});
  }
};

PairStatistics::PairStatistics(const PreparedPair& pair, const IgnoredPairs& ignored,
                               const std::vector<int64_t>& query_labels, const std::vector<int64_t>& gallery_labels,
                               const std::vector<int64_t>& n_gt, std::vector<double> fmr_vals,
                               PairStatisticsOptions options) {
  for (const double fmr : fmr_vals) {
    OML_CHECK(fmr >= 0.0 && fmr <= 1.0, ConfigError, "metric_args.fmr_vals: values must be within [0, 1], got ",
              fmr);
  }
  impl_ = std::make_unique<Impl>(pair, ignored, query_labels, gallery_labels, std::move(fmr_vals), options);
  const int64_t ng = pair.num_gallery();
  for (int64_t q = 0; q < pair.num_queries(); ++q) {
    num_positive_ += n_gt[q];
    num_negative_ += ng - ignored.count(q) - n_gt[q];
  }
  impl_->keep_positives = num_positive_ <= options.positive_cap;
  passes_ = 1;
}

PairStatistics::~PairStatistics() = default;

BlockConsumer& PairStatistics::first_pass() { return impl_->first; }

std::vector<double> PairStatistics::finish(const BlockShape& shape) {
  Impl& s = *impl_;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (num_positive_ == 0 || num_negative_ == 0 || s.fmr_vals.empty()) return std::vector<double>(s.fmr_vals.size(), nan);

  // The ranks each quantile needs, located in the level-0 histogram.
  std::vector<int64_t> histogram(static_cast<std::size_t>(s.level0.bins), 0);
  for (const auto& per_thread : s.histogram0) {
    for (std::size_t b = 0; b < histogram.size(); ++b) histogram[b] += per_thread[b];
  }
  std::vector<QuantilePosition> positions;
  std::vector<Target> targets;
  auto target_of = [&targets](int64_t rank) -> std::size_t {
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].rank == rank) return t;
    }
    targets.push_back(Target{rank, {}, 0, 0, 0.0});
    return targets.size() - 1;
  };
  std::vector<std::pair<std::size_t, std::size_t>> target_of_fmr;
  for (const double fmr : s.fmr_vals) {
    positions.push_back(quantile_position(num_negative_, fmr));
    const std::size_t lower = target_of(positions.back().lower);
    const std::size_t upper = target_of(positions.back().upper);
    target_of_fmr.emplace_back(lower, upper);
  }
  auto locate = [](Target& target, const std::vector<int64_t>& counts, Level level) {
    int64_t before = target.below;
    for (int64_t b = 0; b < level.bins; ++b) {
      if (target.rank < before + counts[b]) {
        level.index = b;
        target.chain.push_back(level);
        target.below = before;
        target.count = counts[b];
        return;
      }
      before += counts[b];
    }
    throw InternalError(::oml::detail::concat("fnmr@fmr: rank ", target.rank, " beyond the ", before,
                                       " negative pairs counted; distances changed between passes"));
  };
  for (Target& target : targets) locate(target, histogram, s.level0);

  // Refine the cells that are too full to collect. Four levels of 2^16 bins resolve far below
  // float spacing, so a deeper cell can only hold copies of a few values.
  constexpr std::size_t kMaxDepth = 4;
  for (;;) {
    std::vector<std::size_t> refine;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].count > s.options.collect_cap && targets[t].chain.size() < kMaxDepth) refine.push_back(t);
    }
    if (refine.empty()) break;
    std::vector<Level> children;
    for (const std::size_t t : refine) children.push_back(targets[t].chain.back().child(s.options.bins));
    std::vector<std::vector<std::vector<int64_t>>> counts(
        s.threads, std::vector<std::vector<int64_t>>(refine.size(),
                                                     std::vector<int64_t>(static_cast<std::size_t>(s.options.bins), 0)));
    s.pass(shape, [&](int thread, double d2, bool positive) {
      if (positive) return;
      const int64_t bin0 = s.level0.bin_of(d2);
      for (std::size_t r = 0; r < refine.size(); ++r) {
        if (in_cell(targets[refine[r]].chain, bin0, d2)) ++counts[thread][r][children[r].bin_of(d2)];
      }
    });
    ++passes_;
    for (std::size_t r = 0; r < refine.size(); ++r) {
      std::vector<int64_t> merged(static_cast<std::size_t>(s.options.bins), 0);
      for (const auto& per_thread : counts) {
        for (std::size_t b = 0; b < merged.size(); ++b) merged[b] += per_thread[r][b];
      }
      locate(targets[refine[r]], merged, children[r]);
    }
  }

  // Collect the values of every target cell (cells shared by two ranks once) and read the ranks.
  std::vector<std::size_t> group_of(targets.size());
  std::vector<std::size_t> leaders;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    group_of[t] = leaders.size();
    for (std::size_t g = 0; g < leaders.size(); ++g) {
      if (same_cell(targets[leaders[g]], targets[t])) group_of[t] = g;
    }
    if (group_of[t] == leaders.size()) leaders.push_back(t);
  }
  // Per thread and cell: the squared distances (or, for a cell still over the cap at the
  // deepest level, the distinct values with multiplicities).
  std::vector<bool> as_counts(leaders.size());
  for (std::size_t g = 0; g < leaders.size(); ++g) as_counts[g] = targets[leaders[g]].count > s.options.collect_cap;
  std::vector<std::vector<std::vector<float>>> values(s.threads, std::vector<std::vector<float>>(leaders.size()));
  std::vector<std::vector<std::map<float, int64_t>>> counted(s.threads,
                                                             std::vector<std::map<float, int64_t>>(leaders.size()));
  s.pass(shape, [&](int thread, double d2, bool positive) {
    if (positive) return;
    const int64_t bin0 = s.level0.bin_of(d2);
    for (std::size_t g = 0; g < leaders.size(); ++g) {
      if (!in_cell(targets[leaders[g]].chain, bin0, d2)) continue;
      if (as_counts[g]) {
        ++counted[thread][g][static_cast<float>(d2)];
      } else {
        values[thread][g].push_back(static_cast<float>(d2));
      }
    }
  });
  ++passes_;
  for (std::size_t g = 0; g < leaders.size(); ++g) {
    std::map<float, int64_t> merged;
    std::vector<float> all;
    for (int t = 0; t < s.threads; ++t) {
      all.insert(all.end(), values[t][g].begin(), values[t][g].end());
      for (const auto& [value, count] : counted[t][g]) merged[value] += count;
    }
    std::sort(all.begin(), all.end());
    int64_t total = static_cast<int64_t>(all.size());
    for (const auto& entry : merged) total += entry.second;
    OML_CHECK(total == targets[leaders[g]].count, InternalError, "fnmr@fmr: a histogram cell held ",
              targets[leaders[g]].count, " negative distances in one pass and ", total,
              " in the next; distances changed between passes");
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (group_of[t] != g) continue;
      int64_t rank = targets[t].rank - targets[t].below;
      if (!as_counts[g]) {
        targets[t].value = all[static_cast<std::size_t>(rank)];
        continue;
      }
      for (const auto& [value, count] : merged) {
        if (rank < count) {
          targets[t].value = value;
          break;
        }
        rank -= count;
      }
    }
  }

  std::vector<double> thresholds;
  for (std::size_t f = 0; f < s.fmr_vals.size(); ++f) {
    thresholds.push_back(interpolate(std::sqrt(targets[target_of_fmr[f].first].value),
                                     std::sqrt(targets[target_of_fmr[f].second].value), positions[f].fraction));
  }

  // Positives at or above each threshold.
  std::vector<std::vector<int64_t>> above(s.threads, std::vector<int64_t>(thresholds.size(), 0));
  auto count_positive = [&](int thread, double d2) {
    const double distance = std::sqrt(d2);
    for (std::size_t f = 0; f < thresholds.size(); ++f) above[thread][f] += distance >= thresholds[f];
  };
  if (s.keep_positives) {
    for (int t = 0; t < s.threads; ++t) {
      for (const float d2 : s.positives[t]) count_positive(t, static_cast<double>(d2));
    }
  } else {
    s.pass(shape, [&](int thread, double d2, bool positive) {
      if (positive) count_positive(thread, d2);
    });
    ++passes_;
  }
  std::vector<double> fnmr;
  for (std::size_t f = 0; f < thresholds.size(); ++f) {
    int64_t total = 0;
    for (const auto& per_thread : above) total += per_thread[f];
    fnmr.push_back(static_cast<double>(total) / static_cast<double>(num_positive_));
  }
  return fnmr;
}

}  // namespace oml::metrics::detail
