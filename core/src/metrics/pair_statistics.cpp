// The facade over the two algorithms of fnmr@fmr: pass 1 runs the window scan (window_scan.h)
// or the level-0 histogram (histogram_refinement.h) over the pair scan (pair_scan.h); finish()
// reads the quantiles from the windows, falls back to the histogram method when they missed,
// and counts the positives at or above each threshold.
#include "oml/metrics/detail/pair_statistics.h"

#include <cmath>
#include <limits>

#include "histogram_refinement.h"
#include "oml/common/error.h"
#include "oml/metrics/fnmr.h"
#include "pair_scan.h"
#include "window_scan.h"

namespace oml::metrics::detail {

using retrieval::BlockShape;
using retrieval::IgnoredPairs;
using retrieval::detail::BlockConsumer;
using retrieval::detail::PreparedPair;

struct PairStatistics::Impl {
  // Pass 1: the window scan, or (window mode off) the level-0 histogram of negatives;
  // positives kept when they fit.
  class FirstPass final : public BlockConsumer {
   public:
    explicit FirstPass(Impl& impl) : impl_(impl) {}
    void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override {
      Impl& s = impl_;
      if (s.window) {
        s.window->block(q0, q1, g0, g1, block);
        return;
      }
      s.scan.visit(q0, q1, g0, g1, block, [&s](int thread, double d2, bool positive) {
        if (positive) {
          if (s.positives.keep) s.positives.per_thread[thread].push_back(static_cast<float>(d2));
        } else {
          s.histogram.add(thread, d2);
        }
      });
    }

   private:
    Impl& impl_;
  };

  Impl(const PreparedPair& pair, const IgnoredPairs& ignored, const std::vector<int64_t>& query_labels,
       const std::vector<int64_t>& gallery_labels, std::vector<double> fmr, const PairStatisticsOptions& o)
      : scan(pair, ignored, query_labels, gallery_labels),
        fmr_vals(std::move(fmr)),
        options(o),
        histogram(scan, o) {
    positives.per_thread.resize(scan.threads());
  }

  // Positives at or above each threshold, as a fraction of all positives.
  std::vector<double> count_positives(const BlockShape& shape, const std::vector<double>& thresholds,
                                      int64_t num_positive) {
    std::vector<std::vector<int64_t>> above(scan.threads(), std::vector<int64_t>(thresholds.size(), 0));
    auto count_positive = [&](int thread, double value) {
      const double distance = scan.pair().distance_of_value(value);
      for (std::size_t f = 0; f < thresholds.size(); ++f) above[thread][f] += distance >= thresholds[f];
    };
    if (positives.keep) {
      for (int t = 0; t < scan.threads(); ++t) {
        for (const float d2 : positives.per_thread[t]) count_positive(t, static_cast<double>(d2));
      }
    } else {
      scan.pass(shape, [&](int thread, double d2, bool positive) {
        if (positive) count_positive(thread, d2);
      });
    }
    std::vector<double> fnmr;
    for (std::size_t f = 0; f < thresholds.size(); ++f) {
      int64_t total = 0;
      for (const auto& per_thread : above) total += per_thread[f];
      fnmr.push_back(static_cast<double>(total) / static_cast<double>(num_positive));
    }
    return fnmr;
  }

  PairScan scan;
  std::vector<double> fmr_vals;
  PairStatisticsOptions options;
  std::vector<QuantilePosition> positions;  // per fmr value (none without negatives)
  KeptPositives positives;
  HistogramRefinement histogram;
  std::unique_ptr<WindowScan> window;  // pass 1 in window mode
  FirstPass first{*this};
};

PairStatistics::PairStatistics(const PreparedPair& pair, const IgnoredPairs& ignored,
                               const std::vector<int64_t>& query_labels,
                               const std::vector<int64_t>& gallery_labels, const std::vector<int64_t>& n_gt,
                               std::vector<double> fmr_vals, PairStatisticsOptions options) {
  for (const double fmr : fmr_vals) {
    if (!(fmr >= 0.0 && fmr <= 1.0))
      throw SettingError("metric_args.fmr_vals",
                         ::oml::detail::concat("values must be within [0, 1], got ", fmr));
  }
  impl_ = std::make_unique<Impl>(pair, ignored, query_labels, gallery_labels, std::move(fmr_vals), options);
  Impl& s = *impl_;
  const int64_t ng = pair.num_gallery();
  for (int64_t q = 0; q < pair.num_queries(); ++q) {
    num_positive_ += n_gt[q];
    num_negative_ += ng - ignored.count(q) - n_gt[q];
  }
  s.positives.keep = num_positive_ <= options.positive_cap;
  if (num_negative_ > 0) {
    for (const double fmr : s.fmr_vals) s.positions.push_back(quantile_position(num_negative_, fmr));
  }
  if (num_positive_ > 0 && WindowScan::applies(options, s.positions.size(), num_negative_)) {
    s.window = std::make_unique<WindowScan>(s.scan, s.positions, num_negative_, options, s.positives);
  } else {
    s.histogram.start();
  }
}

PairStatistics::~PairStatistics() = default;

BlockConsumer& PairStatistics::first_pass() { return impl_->first; }

int PairStatistics::passes() const { return 1 + impl_->scan.passes(); }

std::vector<double> PairStatistics::finish(const BlockShape& shape) {
  Impl& s = *impl_;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (num_positive_ == 0 || num_negative_ == 0 || s.fmr_vals.empty())
    return std::vector<double>(s.fmr_vals.size(), nan);

  std::optional<std::vector<RankValues>> values;
  if (s.window) {
    values = s.window->read();
    // The windows missed a rank: the histogram method needs its level 0, which pass 1 skipped.
    if (!values) s.histogram.count_level0(shape);
  }
  if (!values) values = s.histogram.read(shape, s.positions);
  std::vector<double> thresholds;
  for (std::size_t f = 0; f < s.fmr_vals.size(); ++f) {
    // Interpolated between the two ranks' distances (not their squares), as torch.quantile over
    // the distances; under negative_dot between the two -q.g.
    const PreparedPair& pair = s.scan.pair();
    thresholds.push_back(interpolate(pair.distance_of_value((*values)[f].lower),
                                     pair.distance_of_value((*values)[f].upper), s.positions[f].fraction));
  }
  thresholds_ = thresholds;
  return s.count_positives(shape, thresholds, num_positive_);
}

}  // namespace oml::metrics::detail
