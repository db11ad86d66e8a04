#include "oml/samplers/category_balance_sampler.h"

#include <numeric>

#include "category_checks.h"
#include "oml/data/sampler_rng.h"

namespace oml::samplers {

void check_options(const CategoryBalanceOptions& options) {
  detail::check_category_options("category_balance", options.n_categories, options.n_labels,
                                 options.n_instances);
}

CategoryBalanceSampler::CategoryBalanceSampler(const data::SamplerContext& context,
                                               const CategoryBalanceOptions& options)
    : options_(options), seed_(context.seed) {
  check_options(options);
  groups_ = LabelGroups::build(context, name());
  categories_ = CategoryGroups::build(context, groups_, name());
  detail::check_category_fit(name(), context, groups_, categories_, options.n_categories, options.n_labels);
  if (!options.resample_labels) {
    detail::require_labels_per_category(name(), context, categories_, options.n_labels,
                                        "; lower n_labels or set resample_labels: true");
  }
  for (const auto& labels : categories_.label_groups) {
    weights_.push_back(options.weight_categories ? static_cast<double>(labels.size()) : 1.0);
  }
  epoch_size_ = (groups_.count() + options.n_labels - 1) / options.n_labels;
}

std::vector<data::Batch> CategoryBalanceSampler::batches(int64_t epoch) const {
  data::SamplerRng rng(seed_, epoch);
  std::vector<data::Batch> out;
  out.reserve(epoch_size_);
  for (int64_t b = 0; b < epoch_size_; ++b) {
    data::Batch batch;
    batch.reserve(batch_size());
    for (std::size_t category : rng.choose_weighted_distinct(weights_, options_.n_categories)) {
      for (int64_t group : rng.smart_sample(categories_.label_groups[category], options_.n_labels)) {
        const auto items = rng.smart_sample(groups_.rows[group], options_.n_instances);
        batch.insert(batch.end(), items.begin(), items.end());
      }
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace oml::samplers
