// pcf@v (docs/metrics.md): the fraction of principal components needed to explain more than v of the
// embeddings' variance; over all embeddings and over each category's.
#include <torch/torch.h>

#include "builtin_metrics.h"
#include "oml/common/logging.h"
#include "oml/metrics/pcf.h"

namespace oml::metrics::builtin {

namespace {

class PcfMetric final : public Metric {
 public:
  explicit PcfMetric(std::vector<double> variances) : variances_(std::move(variances)) {}

  std::vector<std::string> names() const override {
    std::vector<std::string> names;
    for (const double v : variances_) names.push_back("pcf/" + format_key_number(v));
    return names;
  }

  MetricValues compute(const MetricInputs& inputs) const override {
    const EmbeddingSet& set = inputs.set;
    MetricValues values;
    auto add = [&](const std::string& group, const at::Tensor& embeddings) {
      const std::vector<double> pcf = principal_components_fraction(embeddings, variances_);
      for (std::size_t i = 0; i < pcf.size(); ++i)
        values.values[group + "/pcf/" + format_key_number(variances_[i])] = pcf[i];
    };
    OML_CHECK(set.embeddings.size(0) >= 2, DataError, "pcf needs at least 2 embeddings, got ",
              set.embeddings.size(0));
    add(kOverall, set.embeddings);
    if (!inputs.per_category) return values;
    std::map<std::string, std::vector<int64_t>> rows_of;
    for (std::size_t i = 0; i < set.categories.size(); ++i)
      rows_of[set.categories[i]].push_back(static_cast<int64_t>(i));
    for (const auto& [category, rows] : rows_of) {
      if (rows.size() < 2) {
        log::warn("pcf for category '" + category + "' skipped: it has a single embedding");
        continue;
      }
      add(category, set.embeddings.index_select(0, torch::tensor(rows, torch::kLong)));
    }
    return values;
  }

 private:
  std::vector<double> variances_;
};

}  // namespace

std::vector<double> parse_pcf(config::ArgsReader& args) {
  return read_fractions(args, "pcf", "pcf_variance", "pfc_variance");  // OML's config spells it pfc
}

std::shared_ptr<Metric> build_pcf(const std::vector<double>& variances, const NoContext&) {
  if (variances.empty()) return nullptr;
  return std::make_shared<PcfMetric>(variances);
}

}  // namespace oml::metrics::builtin
