#include "histogram_refinement.h"

#include <algorithm>
#include <map>

#include "oml/common/error.h"

namespace oml::metrics::detail {

namespace {

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

}  // namespace

HistogramRefinement::HistogramRefinement(PairScan& scan, const PairStatisticsOptions& options)
    : scan_(scan), options_(options) {
  const double top = scan.pair().max_value() * (1.0 + 1e-5) + 1e-30;
  level0_ = Level{0.0, static_cast<double>(options.bins) / top, options.bins, 0};
}

void HistogramRefinement::start() {
  level0_counts_.assign(scan_.threads(), std::vector<int64_t>(static_cast<std::size_t>(options_.bins), 0));
}

void HistogramRefinement::count_level0(const retrieval::BlockShape& shape) {
  start();
  scan_.pass(shape, [this](int thread, double d2, bool positive) {
    if (!positive) add(thread, d2);
  });
}

std::vector<RankValues> HistogramRefinement::read(const retrieval::BlockShape& shape,
                                                  const std::vector<QuantilePosition>& positions) {
  // The ranks each quantile needs, located in the level-0 histogram.
  std::vector<int64_t> histogram(static_cast<std::size_t>(level0_.bins), 0);
  for (const auto& per_thread : level0_counts_) {
    for (std::size_t b = 0; b < histogram.size(); ++b) histogram[b] += per_thread[b];
  }
  std::vector<Target> targets;
  auto target_of = [&targets](int64_t rank) -> std::size_t {
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].rank == rank) return t;
    }
    targets.push_back(Target{rank, {}, 0, 0, 0.0});
    return targets.size() - 1;
  };
  std::vector<std::pair<std::size_t, std::size_t>> target_of_quantile;
  for (const QuantilePosition& position : positions) {
    const std::size_t lower = target_of(position.lower);
    const std::size_t upper = target_of(position.upper);
    target_of_quantile.emplace_back(lower, upper);
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
  for (Target& target : targets) locate(target, histogram, level0_);

  // Refine the cells that are too full to collect. Four levels of 2^16 bins resolve far below
  // float spacing, so a deeper cell can only hold copies of a few values.
  constexpr std::size_t kMaxDepth = 4;
  for (;;) {
    std::vector<std::size_t> refine;
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].count > options_.collect_cap && targets[t].chain.size() < kMaxDepth) refine.push_back(t);
    }
    if (refine.empty()) break;
    std::vector<Level> children;
    for (const std::size_t t : refine) children.push_back(targets[t].chain.back().child(options_.bins));
    std::vector<std::vector<std::vector<int64_t>>> counts(
        scan_.threads(),
        std::vector<std::vector<int64_t>>(refine.size(),
                                          std::vector<int64_t>(static_cast<std::size_t>(options_.bins), 0)));
    scan_.pass(shape, [&](int thread, double d2, bool positive) {
      if (positive) return;
      const int64_t bin0 = level0_.bin_of(d2);
      for (std::size_t r = 0; r < refine.size(); ++r) {
        if (in_cell(targets[refine[r]].chain, bin0, d2)) ++counts[thread][r][children[r].bin_of(d2)];
      }
    });
    for (std::size_t r = 0; r < refine.size(); ++r) {
      std::vector<int64_t> merged(static_cast<std::size_t>(options_.bins), 0);
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
  for (std::size_t g = 0; g < leaders.size(); ++g)
    as_counts[g] = targets[leaders[g]].count > options_.collect_cap;
  std::vector<std::vector<std::vector<float>>> values(scan_.threads(),
                                                      std::vector<std::vector<float>>(leaders.size()));
  std::vector<std::vector<std::map<float, int64_t>>> counted(
      scan_.threads(), std::vector<std::map<float, int64_t>>(leaders.size()));
  scan_.pass(shape, [&](int thread, double d2, bool positive) {
    if (positive) return;
    const int64_t bin0 = level0_.bin_of(d2);
    for (std::size_t g = 0; g < leaders.size(); ++g) {
      if (!in_cell(targets[leaders[g]].chain, bin0, d2)) continue;
      if (as_counts[g]) {
        ++counted[thread][g][static_cast<float>(d2)];
      } else {
        values[thread][g].push_back(static_cast<float>(d2));
      }
    }
  });
  for (std::size_t g = 0; g < leaders.size(); ++g) {
    std::map<float, int64_t> merged;
    std::vector<float> all;
    for (int t = 0; t < scan_.threads(); ++t) {
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

  std::vector<RankValues> out;
  for (const auto& [lower, upper] : target_of_quantile)
    out.push_back({targets[lower].value, targets[upper].value});
  return out;
}

}  // namespace oml::metrics::detail
