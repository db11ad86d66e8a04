#pragma once
// `distinct_category_balance`: C x P x K batches that use every label of a category before any
// label of it repeats (docs/samplers.md).

#include <cstdint>

#include "oml/data/sampler.h"
#include "oml/samplers/label_groups.h"

namespace oml::samplers {

/// Args of `distinct_category_balance`:
///   sampler: {name: distinct_category_balance,
///             args: {n_categories: 2, n_labels: 4, n_instances: 2, epoch_size: 500}}
struct DistinctCategoryBalanceOptions {
  int64_t n_categories = 0;  ///< C: categories per batch; 1 <= C <= #categories
  int64_t n_labels = 0;      ///< P: labels per category; 1 < P <= L; every category needs >= P labels
  int64_t n_instances = 0;   ///< K: items per label; K > 1
  int64_t epoch_size = 0;    ///< batches per epoch; >= 1 (required, as in OML)
};

/// config::ArgumentError unless n_categories >= 1, n_labels > 1, n_instances > 1, epoch_size >= 1: what the
/// args alone can tell (the sampler's parse). What depends on the data is checked when the sampler is built.
void check_options(const DistinctCategoryBalanceOptions& options);

/// Each batch draws C distinct categories (uniformly) among those with unused labels, then P
/// unused labels of each; a category with fewer than P unused labels gives all of them plus
/// distinct used ones. When fewer than C categories have unused labels, every label becomes
/// unused again. K items per label with smart_sample.
class DistinctCategoryBalanceSampler final : public data::BatchSampler {
 public:
  DistinctCategoryBalanceSampler(const data::SamplerContext& context,
                                 const DistinctCategoryBalanceOptions& options);

  std::string name() const override { return "distinct_category_balance"; }
  int64_t size() const override { return options_.epoch_size; }
  int64_t batch_size() const override {
    return options_.n_categories * options_.n_labels * options_.n_instances;
  }
  std::vector<data::Batch> batches(int64_t epoch) const override;

 private:
  LabelGroups groups_;
  CategoryGroups categories_;
  DistinctCategoryBalanceOptions options_;
  int64_t seed_;
};

}  // namespace oml::samplers
