#include "oml/metrics/detail/pair_statistics.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <unordered_map>

#include <ATen/ATen.h>

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
void visit_pairs(const PreparedPair& pair, const IgnoredPairs& ignored,
                 const std::vector<int64_t>& query_labels, const std::vector<int64_t>& gallery_labels,
                 int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block, Fn&& fn) {
  const int64_t width = g1 - g0;
  const float* norms = pair.gallery_norm2.data() + g0;
  const int64_t* labels = gallery_labels.data() + g0;
  const int64_t* sequences =
      ignored.gallery_sequences().empty() ? nullptr : ignored.gallery_sequences().data() + g0;
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

// A range of squared distances [lo, hi] whose negatives pass 1 collects; negatives below lo
// are only counted. lo = -inf / hi = +inf for an open end.
struct Window {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};
constexpr int kMaxWindows = 8;
constexpr int64_t kGroup = 16;

// The squared distance of one pair from its block entry, exactly as visit_pairs computes it
// (every pass must see the same float values).
inline float squared_distance(float query_norm2, float block_value, float gallery_norm2) {
  const float d2 = query_norm2 + (block_value + gallery_norm2);
  return d2 < 0.0f ? 0.0f : d2;
}

// Pass 1's inner loop over one block row, for every pair regardless of label (the few
// same-label and ignored pairs are corrected afterwards): counts per window the values below
// lo into below[w], writes the columns that fall into any window to `candidates` and returns
// how many. Plain float loops that the compiler vectorises (AVX2 where the CPU has it).
__attribute__((target_clones("avx2", "default"))) int64_t scan_row(const float* row, const float* norms,
                                                                   int64_t width, float query_norm2,
                                                                   const Window* windows, int num_windows,
                                                                   int64_t* below, int32_t* candidates) {
  for (int w = 0; w < num_windows; ++w) {
    const float lo = windows[w].lo;
    int32_t count = 0;
    for (int64_t j = 0; j < width; ++j) count += squared_distance(query_norm2, row[j], norms[j]) < lo ? 1 : 0;
    below[w] += count;
  }
  int64_t found = 0;
  int64_t j0 = 0;
  for (; j0 + kGroup <= width; j0 += kGroup) {
    int32_t any = 0;
    for (int w = 0; w < num_windows; ++w) {
      const float lo = windows[w].lo, hi = windows[w].hi;
      for (int64_t k = 0; k < kGroup; ++k) {
        const float d2 = squared_distance(query_norm2, row[j0 + k], norms[j0 + k]);
        any |= (d2 >= lo) & (d2 <= hi);
      }
    }
    if (!any) continue;
    for (int64_t k = 0; k < kGroup; ++k) {
      const float d2 = squared_distance(query_norm2, row[j0 + k], norms[j0 + k]);
      int32_t in = 0;
      for (int w = 0; w < num_windows; ++w) in |= (d2 >= windows[w].lo) & (d2 <= windows[w].hi);
      candidates[found] = static_cast<int32_t>(j0 + k);
      found += in;
    }
  }
  for (; j0 < width; ++j0) {
    const float d2 = squared_distance(query_norm2, row[j0], norms[j0]);
    int32_t in = 0;
    for (int w = 0; w < num_windows; ++w) in |= (d2 >= windows[w].lo) & (d2 <= windows[w].hi);
    candidates[found] = static_cast<int32_t>(j0);
    found += in;
  }
  return found;
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

  // Window mode (the default): pass 1 counts the negatives below each window and collects
  // those inside it; when every quantile rank lands inside its window, that single pass is
  // exact. Otherwise (or with window_cap 0) the histogram passes below take over.
  bool use_window = false;
  std::vector<Window> windows;
  std::vector<int> window_of_fmr;
  std::vector<std::vector<int64_t>> below;              // per thread, per window
  std::vector<std::vector<std::vector<float>>> inside;  // per thread, per window
  std::atomic<int64_t> collected{0};
  std::atomic<bool> overflow{false};
  std::unordered_map<int64_t, std::vector<int64_t>> gallery_by_label;  // sorted positions
  std::vector<std::vector<int32_t>> candidates;                        // per thread scratch

  void window_block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) {
    const int64_t width = g1 - g0;
    const float* norms = pair.gallery_norm2.data() + g0;
    const int64_t* labels = gallery_labels.data() + g0;
    const bool has_sequences = !ignored.gallery_sequences().empty();
    const int nw = static_cast<int>(windows.size());
    at::parallel_for(0, q1 - q0, 8, [&](int64_t begin, int64_t end) {
      const int thread = at::get_thread_num();
      auto& cand = candidates[thread];
      if (static_cast<int64_t>(cand.size()) < width) cand.resize(static_cast<std::size_t>(width));
      int64_t* my_below = below[thread].data();
      auto& my_inside = inside[thread];
      auto& my_positives = positives[thread];
      int64_t pushed = 0;
      auto add_negative = [&](float d2) {
        for (int w = 0; w < nw; ++w) {
          if (d2 >= windows[w].lo && d2 <= windows[w].hi) {
            my_inside[w].push_back(d2);
            ++pushed;
          }
        }
      };
      for (int64_t i = begin; i < end; ++i) {
        const int64_t q = q0 + i;
        const float* row = block + i * width;
        const float qn2 = pair.query_norm2[q];
        const int64_t label = query_labels[q];
        if (has_sequences && ignored.query_sequence(q) >= 0) {
          // Rows with sequences: the plain per-pair loop.
          for (int64_t j = 0; j < width; ++j) {
            if (ignored.contains(q, g0 + j)) continue;
            const float d2 = squared_distance(qn2, row[j], norms[j]);
            if (labels[j] == label) {
              if (keep_positives) my_positives.push_back(d2);
              continue;
            }
            for (int w = 0; w < nw; ++w) my_below[w] += d2 < windows[w].lo;
            add_negative(d2);
          }
          continue;
        }
        const int64_t self = ignored.self_position(q) - g0;
        const int64_t found = scan_row(row, norms, width, qn2, windows.data(), nw, my_below, cand.data());
        for (int64_t c = 0; c < found; ++c) {
          const int64_t j = cand[c];
          if (labels[j] == label || j == self) continue;
          add_negative(squared_distance(qn2, row[j], norms[j]));
        }
        // scan_row counted every pair: take back the same-label ones (keeping the positives)
        // and the item itself.
        const auto same = gallery_by_label.find(label);
        if (same != gallery_by_label.end()) {
          const auto& positions = same->second;
          for (auto it = std::lower_bound(positions.begin(), positions.end(), g0);
               it != positions.end() && *it < g1; ++it) {
            const int64_t j = *it - g0;
            const float d2 = squared_distance(qn2, row[j], norms[j]);
            for (int w = 0; w < nw; ++w) my_below[w] -= d2 < windows[w].lo;
            if (j != self && keep_positives) my_positives.push_back(d2);
          }
        }
        if (self >= 0 && self < width && labels[self] != label) {
          const float d2 = squared_distance(qn2, row[self], norms[self]);
          for (int w = 0; w < nw; ++w) my_below[w] -= d2 < windows[w].lo;
        }
      }
      if (pushed > 0 && collected.fetch_add(pushed) + pushed > options.window_cap) {
        overflow = true;
        for (auto& v : my_inside) std::vector<float>().swap(v);
      }
    });
    if (overflow) {
      // Free what was collected and collect no more; finish() falls back to the histograms.
      for (auto& per_thread : inside) {
        for (auto& v : per_thread) std::vector<float>().swap(v);
      }
      windows.assign(windows.size(),
                     Window{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
    }
  }

  // Pass 1: the window scan, or (window mode off) the level-0 histogram of negatives;
  // positives kept when they fit.
  class FirstPass final : public BlockConsumer {
   public:
    explicit FirstPass(Impl& impl) : impl_(impl) {}
    void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override {
      Impl& s = impl_;
      if (s.use_window) {
        s.window_block(q0, q1, g0, g1, block);
        return;
      }
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

  Impl(const PreparedPair& p, const IgnoredPairs& i, const std::vector<int64_t>& ql,
       const std::vector<int64_t>& gl, std::vector<double> fmr, PairStatisticsOptions o)
      : pair(p), ignored(i), query_labels(ql), gallery_labels(gl), fmr_vals(std::move(fmr)), options(o) {
    threads = std::max(1, at::get_num_threads());
    double max_query_norm = 0.0;
    for (const double n : pair.query_norm) max_query_norm = std::max(max_query_norm, n);
    const double reach = max_query_norm + pair.gallery_max_norm;
    const double top = reach * reach * (1.0 + 1e-5) + 1e-30;
    level0 = Level{0.0, static_cast<double>(options.bins) / top, options.bins, 0};
    positives.resize(threads);
  }

  void start_histogram() {
    histogram0.assign(threads, std::vector<int64_t>(static_cast<std::size_t>(options.bins), 0));
  }

  // Chooses the windows of pass 1 for the quantile ranks of every fmr value. All negatives
  // when they fit in window_cap; otherwise, from a strided sample of queries x gallery items,
  // a range of ranks around each quantile wide enough (many standard errors of the sample
  // quantile, query and gallery clustering included) to hold the exact ranks in all but
  // pathological cases — which finish() detects exactly and repairs with the histograms.
  void choose_windows(int64_t num_negative) {
    use_window = options.window_cap > 0 && !fmr_vals.empty() && num_negative > 0 &&
                 static_cast<int>(fmr_vals.size()) <= kMaxWindows;
    if (!use_window) {
      start_histogram();
      return;
    }
    for (int64_t g = 0; g < pair.num_gallery(); ++g) gallery_by_label[gallery_labels[g]].push_back(g);
    candidates.resize(threads);
    below.assign(threads, {});
    inside.assign(threads, {});
    if (num_negative <= options.window_cap) {
      windows = {Window{}};
      window_of_fmr.assign(fmr_vals.size(), 0);
    } else {
      sample_windows(num_negative);
    }
    for (int t = 0; t < threads; ++t) {
      below[t].assign(windows.size(), 0);
      inside[t].resize(windows.size());
    }
  }

  void sample_windows(int64_t num_negative) {
    // The sample: C chunks of 16 consecutive queries spread over all queries, each against
    // its own 16 gallery items drawn at random (deterministically). Small chunks keep the
    // sample's pairs nearly independent (queries and gallery items vary a lot in how many
    // negatives lie below a threshold); each chunk estimates the fraction of negatives below
    // t, and the spread of those estimates gives the standard error.
    constexpr int64_t kChunk = 16;
    const int64_t nq = pair.num_queries(), ng = pair.num_gallery();
    const int64_t chunks = std::max<int64_t>(1, options.sample_chunks);
    const int64_t cols = std::min(ng, kChunk);
    std::vector<float> values;
    std::vector<int32_t> chunk_of;
    std::mt19937_64 random(0x5eed);
    std::vector<int64_t> qi, gi(static_cast<std::size_t>(cols));
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t q0 = c * std::max<int64_t>(0, nq - kChunk) / chunks, q1 = std::min(nq, q0 + kChunk);
      qi.resize(static_cast<std::size_t>(q1 - q0));
      std::iota(qi.begin(), qi.end(), q0);
      for (auto& g : gi) g = static_cast<int64_t>(random() % static_cast<uint64_t>(ng));
      const at::Tensor dots =
          at::mm(pair.queries.narrow(0, q0, q1 - q0),
                 pair.gallery.index_select(0, at::from_blob(gi.data(), {cols}, at::kLong)).t())
              .mul_(-2.0f)
              .contiguous();
      const float* b = dots.data_ptr<float>();
      for (int64_t q = q0; q < q1; ++q) {
        for (int64_t k = 0; k < cols; ++k) {
          const int64_t g = gi[static_cast<std::size_t>(k)];
          if (gallery_labels[g] == query_labels[q] || ignored.contains(q, g)) continue;
          values.push_back(
              squared_distance(pair.query_norm2[q], b[(q - q0) * cols + k], pair.gallery_norm2[g]));
          chunk_of.push_back(static_cast<int32_t>(c));
        }
      }
    }
    if (values.empty()) {  // nothing to go by: collect everything and let the cap decide
      windows = {Window{}};
      window_of_fmr.assign(fmr_vals.size(), 0);
      return;
    }
    std::vector<float> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    const double n = static_cast<double>(sorted.size());
    auto at_fraction = [&](double p) {
      return sorted[static_cast<std::size_t>(std::clamp(p, 0.0, 1.0) * (n - 1.0))];
    };
    auto standard_error = [&](float t) {
      std::vector<double> hits(chunks, 0.0), all(chunks, 0.0);
      for (std::size_t v = 0; v < values.size(); ++v) {
        hits[chunk_of[v]] += values[v] < t ? 1.0 : 0.0;
        all[chunk_of[v]] += 1.0;
      }
      double sum = 0, sum2 = 0, m = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        if (all[c] == 0) continue;
        const double f = hits[c] / all[c];
        sum += f;
        sum2 += f * f;
        m += 1;
      }
      if (m < 2) return 0.5;
      const double mean = sum / m;
      return std::sqrt(std::max(0.0, sum2 / m - mean * mean) / (m - 1.0));
    };
    const double total = static_cast<double>(num_negative);
    const double half_cap =
        0.45 * static_cast<double>(options.window_cap) / total / static_cast<double>(fmr_vals.size());
    std::vector<std::pair<Window, std::vector<int>>> ranges;  // window, fmr indices
    for (std::size_t f = 0; f < fmr_vals.size(); ++f) {
      const QuantilePosition position = quantile_position(num_negative, fmr_vals[f]);
      const double p_lo = static_cast<double>(position.lower) / std::max(1.0, total - 1.0);
      const double p_hi = static_cast<double>(position.upper) / std::max(1.0, total - 1.0);
      const double se = standard_error(at_fraction(p_lo));
      const double delta = std::min(6.0 * se + 4.0 / n, half_cap);
      Window w;
      if (p_lo - delta > 0.0) w.lo = at_fraction(p_lo - delta);
      if (p_hi + delta < 1.0) w.hi = at_fraction(p_hi + delta);
      ranges.push_back({w, {static_cast<int>(f)}});
    }
    // Overlapping windows become one, so that no value is collected twice.
    std::sort(ranges.begin(), ranges.end(),
              [](const auto& a, const auto& b) { return a.first.lo < b.first.lo; });
    window_of_fmr.assign(fmr_vals.size(), 0);
    windows.clear();
    std::vector<std::vector<int>> members;
    for (const auto& [w, fs] : ranges) {
      if (!windows.empty() && w.lo <= windows.back().hi) {
        windows.back().hi = std::max(windows.back().hi, w.hi);
        members.back().insert(members.back().end(), fs.begin(), fs.end());
      } else {
        windows.push_back(w);
        members.push_back(fs);
      }
    }
    for (std::size_t w = 0; w < windows.size(); ++w) {
      for (const int f : members[w]) window_of_fmr[f] = static_cast<int>(w);
    }
  }

  // The exact values at the ranks `targets` asks for, from the windows of pass 1; false when
  // a rank lies outside its window (or the windows overflowed).
  bool read_windows(std::vector<QuantilePosition>& positions, std::vector<double>& lower_values,
                    std::vector<double>& upper_values) {
    if (overflow) return false;
    std::vector<int64_t> below_total(windows.size(), 0);
    for (const auto& per_thread : below) {
      for (std::size_t w = 0; w < windows.size(); ++w) below_total[w] += per_thread[w];
    }
    std::vector<std::vector<float>> merged(windows.size());
    for (std::size_t w = 0; w < windows.size(); ++w) {
      std::size_t size = 0;
      for (const auto& per_thread : inside) size += per_thread[w].size();
      merged[w].reserve(size);
      for (auto& per_thread : inside) {
        merged[w].insert(merged[w].end(), per_thread[w].begin(), per_thread[w].end());
        std::vector<float>().swap(per_thread[w]);
      }
    }
    for (std::size_t f = 0; f < fmr_vals.size(); ++f) {
      const int w = window_of_fmr[f];
      const int64_t count = static_cast<int64_t>(merged[w].size());
      if (positions[f].lower < below_total[w] || positions[f].upper >= below_total[w] + count) return false;
    }
    for (std::size_t f = 0; f < fmr_vals.size(); ++f) {
      auto& values = merged[window_of_fmr[f]];
      const int64_t lower = positions[f].lower - below_total[window_of_fmr[f]];
      const int64_t upper = positions[f].upper - below_total[window_of_fmr[f]];
      std::nth_element(values.begin(), values.begin() + lower, values.end());
      lower_values[f] = values[lower];
      upper_values[f] =
          upper == lower ? values[lower] : *std::min_element(values.begin() + lower + 1, values.end());
    }
    return true;
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
                               const std::vector<int64_t>& query_labels,
                               const std::vector<int64_t>& gallery_labels, const std::vector<int64_t>& n_gt,
                               std::vector<double> fmr_vals, PairStatisticsOptions options) {
  for (const double fmr : fmr_vals) {
    OML_CHECK(fmr >= 0.0 && fmr <= 1.0, ConfigError,
              "metric_args.fmr_vals: values must be within [0, 1], got ", fmr);
  }
  impl_ = std::make_unique<Impl>(pair, ignored, query_labels, gallery_labels, std::move(fmr_vals), options);
  const int64_t ng = pair.num_gallery();
  for (int64_t q = 0; q < pair.num_queries(); ++q) {
    num_positive_ += n_gt[q];
    num_negative_ += ng - ignored.count(q) - n_gt[q];
  }
  impl_->keep_positives = num_positive_ <= options.positive_cap;
  if (num_positive_ > 0) {
    impl_->choose_windows(num_negative_);
  } else {
    impl_->start_histogram();
  }
  passes_ = 1;
}

PairStatistics::~PairStatistics() = default;

BlockConsumer& PairStatistics::first_pass() { return impl_->first; }

std::vector<double> PairStatistics::finish(const BlockShape& shape) {
  Impl& s = *impl_;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (num_positive_ == 0 || num_negative_ == 0 || s.fmr_vals.empty())
    return std::vector<double>(s.fmr_vals.size(), nan);

  std::vector<double> thresholds;
  std::vector<QuantilePosition> window_positions;
  for (const double fmr : s.fmr_vals) window_positions.push_back(quantile_position(num_negative_, fmr));
  std::vector<double> lower_values(s.fmr_vals.size()), upper_values(s.fmr_vals.size());
  if (s.use_window && s.read_windows(window_positions, lower_values, upper_values)) {
    for (std::size_t f = 0; f < s.fmr_vals.size(); ++f) {
      thresholds.push_back(
          interpolate(std::sqrt(lower_values[f]), std::sqrt(upper_values[f]), window_positions[f].fraction));
    }
  } else {
    thresholds = histogram_thresholds(shape);
  }
  return count_positives(shape, thresholds);
}

std::vector<double> PairStatistics::histogram_thresholds(const BlockShape& shape) {
  Impl& s = *impl_;
  if (s.use_window) {
    // Pass 1 collected windows that missed: build the level-0 histogram now.
    s.start_histogram();
    s.pass(shape, [&s](int thread, double d2, bool positive) {
      if (!positive) ++s.histogram0[thread][s.level0.bin_of(d2)];
    });
    ++passes_;
  }
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
      if (targets[t].count > s.options.collect_cap && targets[t].chain.size() < kMaxDepth)
        refine.push_back(t);
    }
    if (refine.empty()) break;
    std::vector<Level> children;
    for (const std::size_t t : refine) children.push_back(targets[t].chain.back().child(s.options.bins));
    std::vector<std::vector<std::vector<int64_t>>> counts(
        s.threads, std::vector<std::vector<int64_t>>(
                       refine.size(), std::vector<int64_t>(static_cast<std::size_t>(s.options.bins), 0)));
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
  for (std::size_t g = 0; g < leaders.size(); ++g)
    as_counts[g] = targets[leaders[g]].count > s.options.collect_cap;
  std::vector<std::vector<std::vector<float>>> values(s.threads,
                                                      std::vector<std::vector<float>>(leaders.size()));
  std::vector<std::vector<std::map<float, int64_t>>> counted(
      s.threads, std::vector<std::map<float, int64_t>>(leaders.size()));
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
                                     std::sqrt(targets[target_of_fmr[f].second].value),
                                     positions[f].fraction));
  }
  return thresholds;
}

std::vector<double> PairStatistics::count_positives(const BlockShape& shape,
                                                    const std::vector<double>& thresholds) {
  Impl& s = *impl_;
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
