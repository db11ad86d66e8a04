#include "window_scan.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace oml::metrics::detail {

namespace {

constexpr int64_t kGroup = 16;

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

bool WindowScan::applies(const PairStatisticsOptions& options, std::size_t num_quantiles,
                         int64_t num_negative) {
  return options.window_cap > 0 && num_quantiles > 0 && num_negative > 0 &&
         num_quantiles <= static_cast<std::size_t>(kMaxWindows);
}

// All negatives when they fit in window_cap; otherwise, from a strided sample of queries x
// gallery items, a range of ranks around each quantile wide enough (many standard errors of the
// sample quantile, query and gallery clustering included) to hold the exact ranks in all but
// pathological cases — which read() detects exactly.
WindowScan::WindowScan(const PairScan& scan, const std::vector<QuantilePosition>& positions,
                       int64_t num_negative, const PairStatisticsOptions& options, KeptPositives& positives)
    : scan_(scan), positions_(positions), options_(options), positives_(positives) {
  const int threads = scan.threads();
  for (int64_t g = 0; g < scan.pair().num_gallery(); ++g)
    gallery_by_label_[scan.gallery_labels()[g]].push_back(g);
  candidates_.resize(threads);
  below_.assign(threads, {});
  inside_.assign(threads, {});
  if (num_negative <= options_.window_cap) {
    windows_ = {Window{}};
    window_of_quantile_.assign(positions_.size(), 0);
  } else {
    sample_windows(num_negative);
  }
  for (int t = 0; t < threads; ++t) {
    below_[t].assign(windows_.size(), 0);
    inside_[t].resize(windows_.size());
  }
}

void WindowScan::block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) {
  const auto& pair = scan_.pair();
  const auto& ignored = scan_.ignored();
  const auto& query_labels = scan_.query_labels();
  const auto& gallery_labels = scan_.gallery_labels();
  const int64_t width = g1 - g0;
  const float* norms = pair.gallery_norm2.data() + g0;
  const int64_t* labels = gallery_labels.data() + g0;
  const bool has_sequences = !ignored.gallery_sequences().empty();
  const int nw = static_cast<int>(windows_.size());
  at::parallel_for(0, q1 - q0, 8, [&](int64_t begin, int64_t end) {
    const int thread = at::get_thread_num();
    auto& cand = candidates_[thread];
    if (static_cast<int64_t>(cand.size()) < width) cand.resize(static_cast<std::size_t>(width));
    int64_t* my_below = below_[thread].data();
    auto& my_inside = inside_[thread];
    auto& my_positives = positives_.per_thread[thread];
    int64_t pushed = 0;
    auto add_negative = [&](float d2) {
      for (int w = 0; w < nw; ++w) {
        if (d2 >= windows_[w].lo && d2 <= windows_[w].hi) {
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
            if (positives_.keep) my_positives.push_back(d2);
            continue;
          }
          for (int w = 0; w < nw; ++w) my_below[w] += d2 < windows_[w].lo;
          add_negative(d2);
        }
        continue;
      }
      const int64_t self = ignored.self_position(q) - g0;
      const int64_t found = scan_row(row, norms, width, qn2, windows_.data(), nw, my_below, cand.data());
      for (int64_t c = 0; c < found; ++c) {
        const int64_t j = cand[c];
        if (labels[j] == label || j == self) continue;
        add_negative(squared_distance(qn2, row[j], norms[j]));
      }
      // scan_row counted every pair: take back the same-label ones (keeping the positives)
      // and the item itself.
      const auto same = gallery_by_label_.find(label);
      if (same != gallery_by_label_.end()) {
        const auto& positions = same->second;
        for (auto it = std::lower_bound(positions.begin(), positions.end(), g0);
             it != positions.end() && *it < g1; ++it) {
          const int64_t j = *it - g0;
          const float d2 = squared_distance(qn2, row[j], norms[j]);
          for (int w = 0; w < nw; ++w) my_below[w] -= d2 < windows_[w].lo;
          if (j != self && positives_.keep) my_positives.push_back(d2);
        }
      }
      if (self >= 0 && self < width && labels[self] != label) {
        const float d2 = squared_distance(qn2, row[self], norms[self]);
        for (int w = 0; w < nw; ++w) my_below[w] -= d2 < windows_[w].lo;
      }
    }
    if (pushed > 0 && collected_.fetch_add(pushed) + pushed > options_.window_cap) {
      overflow_ = true;
      for (auto& v : my_inside) std::vector<float>().swap(v);
    }
  });
  if (overflow_) {
    // Free what was collected and collect no more; read() reports the miss.
    for (auto& per_thread : inside_) {
      for (auto& v : per_thread) std::vector<float>().swap(v);
    }
    windows_.assign(windows_.size(),
                    Window{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
  }
}

void WindowScan::sample_windows(int64_t num_negative) {
  const auto& pair = scan_.pair();
  const auto& ignored = scan_.ignored();
  const auto& query_labels = scan_.query_labels();
  const auto& gallery_labels = scan_.gallery_labels();
  // The sample: C chunks of 16 consecutive queries spread over all queries, each against
  // its own 16 gallery items drawn at random (deterministically). Small chunks keep the
  // sample's pairs nearly independent (queries and gallery items vary a lot in how many
  // negatives lie below a threshold); each chunk estimates the fraction of negatives below
  // t, and the spread of those estimates gives the standard error.
  constexpr int64_t kChunk = 16;
  const int64_t nq = pair.num_queries(), ng = pair.num_gallery();
  const int64_t chunks = std::max<int64_t>(1, options_.sample_chunks);
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
            .mul_(pair.block_alpha())
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
    windows_ = {Window{}};
    window_of_quantile_.assign(positions_.size(), 0);
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
      0.45 * static_cast<double>(options_.window_cap) / total / static_cast<double>(positions_.size());
  std::vector<std::pair<Window, std::vector<int>>> ranges;  // window, quantile indices
  for (std::size_t f = 0; f < positions_.size(); ++f) {
    const QuantilePosition& position = positions_[f];
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
  window_of_quantile_.assign(positions_.size(), 0);
  windows_.clear();
  std::vector<std::vector<int>> members;
  for (const auto& [w, fs] : ranges) {
    if (!windows_.empty() && w.lo <= windows_.back().hi) {
      windows_.back().hi = std::max(windows_.back().hi, w.hi);
      members.back().insert(members.back().end(), fs.begin(), fs.end());
    } else {
      windows_.push_back(w);
      members.push_back(fs);
    }
  }
  for (std::size_t w = 0; w < windows_.size(); ++w) {
    for (const int f : members[w]) window_of_quantile_[f] = static_cast<int>(w);
  }
}

std::optional<std::vector<RankValues>> WindowScan::read() {
  if (overflow_) return std::nullopt;
  std::vector<int64_t> below_total(windows_.size(), 0);
  for (const auto& per_thread : below_) {
    for (std::size_t w = 0; w < windows_.size(); ++w) below_total[w] += per_thread[w];
  }
  std::vector<std::vector<float>> merged(windows_.size());
  for (std::size_t w = 0; w < windows_.size(); ++w) {
    std::size_t size = 0;
    for (const auto& per_thread : inside_) size += per_thread[w].size();
    merged[w].reserve(size);
    for (auto& per_thread : inside_) {
      merged[w].insert(merged[w].end(), per_thread[w].begin(), per_thread[w].end());
      std::vector<float>().swap(per_thread[w]);
    }
  }
  for (std::size_t f = 0; f < positions_.size(); ++f) {
    const int w = window_of_quantile_[f];
    const int64_t count = static_cast<int64_t>(merged[w].size());
    if (positions_[f].lower < below_total[w] || positions_[f].upper >= below_total[w] + count) {
      return std::nullopt;
    }
  }
  std::vector<RankValues> out(positions_.size());
  for (std::size_t f = 0; f < positions_.size(); ++f) {
    auto& values = merged[window_of_quantile_[f]];
    const int64_t lower = positions_[f].lower - below_total[window_of_quantile_[f]];
    const int64_t upper = positions_[f].upper - below_total[window_of_quantile_[f]];
    std::nth_element(values.begin(), values.begin() + lower, values.end());
    out[f].lower = values[lower];
    out[f].upper =
        upper == lower ? values[lower] : *std::min_element(values.begin() + lower + 1, values.end());
  }
  return out;
}

}  // namespace oml::metrics::detail
