#include "oml/samplers/distinct_category_balance_sampler.h"

#include <algorithm>

#include "category_checks.h"
#include "oml/data/sampler_rng.h"

namespace oml::samplers {

DistinctCategoryBalanceSampler::DistinctCategoryBalanceSampler(const data::SamplerContext& context,
                                                               const DistinctCategoryBalanceOptions& options)
    : options_(options), seed_(context.seed) {
  check_options(options);
  groups_ = LabelGroups::build(context, name());
  categories_ = CategoryGroups::build(context, groups_, name());
  detail::check_category_fit(name(), context, groups_, categories_, options.n_categories, options.n_labels);
  // A category short of unused labels tops up from its used ones, so it needs P labels in all.
  detail::require_labels_per_category(name(), context, categories_, options.n_labels,
                                      "; every category needs at least n_labels labels");
}

void check_options(const DistinctCategoryBalanceOptions& options) {
  const std::string sampler = "distinct_category_balance";
  detail::check_category_options(sampler, options.n_categories, options.n_labels, options.n_instances);
  if (options.epoch_size < 1) {
    fail_argument(sampler, "epoch_size", "epoch_size (batches per epoch) must be >= 1, got ",
                  options.epoch_size);
  }
}

std::vector<data::Batch> DistinctCategoryBalanceSampler::batches(int64_t epoch) const {
  data::SamplerRng rng(seed_, epoch);
  const auto n_categories = static_cast<std::size_t>(options_.n_categories);
  const auto n_labels = static_cast<std::size_t>(options_.n_labels);

  // Per category: its labels, unused ones first: [0, unused[c]) unused, the rest used.
  std::vector<std::vector<int64_t>> labels;
  std::vector<std::size_t> unused;
  const auto reset = [&] {
    labels = categories_.label_groups;
    unused.clear();
    for (const auto& l : labels) unused.push_back(l.size());
  };
  reset();

  std::vector<data::Batch> out;
  out.reserve(options_.epoch_size);
  for (int64_t b = 0; b < options_.epoch_size; ++b) {
    std::vector<std::size_t> open;  // categories that still have unused labels, ascending
    for (std::size_t c = 0; c < labels.size(); ++c) {
      if (unused[c] > 0) open.push_back(c);
    }
    if (open.size() < n_categories) {
      reset();
      open.resize(labels.size());
      for (std::size_t c = 0; c < open.size(); ++c) open[c] = c;
    }
    data::Batch batch;
    batch.reserve(batch_size());
    for (std::size_t c : rng.choose_distinct(open, n_categories)) {
      std::vector<int64_t>& pool = labels[c];
      std::vector<int64_t> chosen;
      if (unused[c] >= n_labels) {
        // Move n_labels random unused labels to the end of the unused range, then mark them used.
        for (std::size_t i = 0; i < n_labels; ++i) {
          const std::size_t last = unused[c] - 1;
          std::swap(pool[rng.below(unused[c])], pool[last]);
          chosen.push_back(pool[last]);
          --unused[c];
        }
      } else {
        // All unused labels, topped up with distinct used ones; then the whole category is used.
        chosen.assign(pool.begin(), pool.begin() + unused[c]);
        const std::vector<int64_t> used(pool.begin() + unused[c], pool.end());
        const auto extra = rng.choose_distinct(used, n_labels - chosen.size());
        chosen.insert(chosen.end(), extra.begin(), extra.end());
        unused[c] = 0;
      }
      for (int64_t group : chosen) {
        const auto items = rng.smart_sample(groups_.rows[group], options_.n_instances);
        batch.insert(batch.end(), items.begin(), items.end());
      }
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace oml::samplers
