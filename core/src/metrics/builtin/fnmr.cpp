// fnmr@fmr (docs/metrics.md): the fraction of positive pairs at or above the
// fmr-quantile of the negative-pair distances, over every (query, gallery) pair. Its first pass
// rides on the retrieval's distance blocks (detail/pair_statistics.h); reported under OVERALL.
#include "builtin_metrics.h"
#include "oml/common/logging.h"
#include "oml/metrics/detail/pair_statistics.h"

namespace oml::metrics::builtin {

namespace {

class FnmrPass final : public PairPass {
 public:
  FnmrPass(const PairPassInputs& inputs, const std::vector<double>& fmr_vals)
      : statistics_(inputs.pair, inputs.ignored, inputs.query_labels, inputs.gallery_labels, inputs.n_gt,
                    fmr_vals),
        shape_(inputs.shape) {}

  retrieval::detail::BlockConsumer& consumer() override { return statistics_.first_pass(); }

  /// The remaining passes, if any; NaN (with a warning) without positive or negative pairs.
  std::vector<double> finish() {
    std::vector<double> fnmr = statistics_.finish(shape_);
    if (statistics_.num_positive() == 0)
      log::warn("fnmr@fmr is NaN: there are no positive (same-label) pairs");
    if (statistics_.num_negative() == 0)
      log::warn("fnmr@fmr is NaN: there are no negative (different-label) pairs");
    return fnmr;
  }

 private:
  detail::PairStatistics statistics_;
  retrieval::BlockShape shape_;
};

class FnmrMetric final : public Metric {
 public:
  explicit FnmrMetric(std::vector<double> fmr_vals) : fmr_vals_(std::move(fmr_vals)) {}

  std::vector<std::string> names() const override {
    std::vector<std::string> names;
    for (const double fmr : fmr_vals_) names.push_back("fnmr@fmr/" + format_key_number(fmr));
    return names;
  }
  bool needs_pair_pass() const override { return true; }
  std::unique_ptr<PairPass> start_pair_pass(const PairPassInputs& inputs) const override {
    return std::make_unique<FnmrPass>(inputs, fmr_vals_);
  }
  MetricValues compute(const MetricInputs& inputs) const override {
    OML_ASSERT(inputs.pair_pass != nullptr, "fnmr@fmr is computed from its pair pass");
    const std::vector<double> fnmr = static_cast<FnmrPass&>(*inputs.pair_pass).finish();
    MetricValues values;
    for (std::size_t i = 0; i < fnmr.size(); ++i) {
      values.values[kOverall + "/fnmr@fmr/" + format_key_number(fmr_vals_[i])] = fnmr[i];
    }
    return values;
  }

 private:
  std::vector<double> fmr_vals_;
};

}  // namespace

std::vector<double> parse_fnmr(config::ArgsReader& args) { return read_fractions(args, "fnmr", "fmr_vals"); }

std::shared_ptr<Metric> build_fnmr(const std::vector<double>& fmr_vals, const NoContext&) {
  if (fmr_vals.empty()) return nullptr;
  return std::make_shared<FnmrMetric>(fmr_vals);
}

}  // namespace oml::metrics::builtin
