#pragma once
// `category_balance`: C categories x P labels x K items per batch (docs/samplers.md).

#include <cstdint>

#include "oml/data/sampler.h"
#include "oml/samplers/label_groups.h"

namespace oml::samplers {

/// Args of `category_balance`:
///   sampler: {name: category_balance, args: {n_categories: 2, n_labels: 4, n_instances: 2}}
struct CategoryBalanceOptions {
  int64_t n_categories = 0;  ///< C: categories per batch; 1 <= C <= #categories
  int64_t n_labels = 0;      ///< P: labels per category; 1 < P <= L
  int64_t n_instances = 0;   ///< K: items per label; K > 1
  /// Allow categories with fewer than P labels (their labels repeat within a batch).
  bool resample_labels = false;
  /// Draw categories with probability proportional to their number of labels (else uniform).
  bool weight_categories = true;
};

/// config::ArgumentError unless n_categories >= 1, n_labels > 1, n_instances > 1: what the args alone can
/// tell (the sampler's parse). What depends on the data is checked when the sampler is built.
void check_options(const CategoryBalanceOptions& options);

/// ceil(L / P) batches per epoch; each picks C distinct categories, then P labels per category
/// and K items per label (both with smart_sample). Needs the dataframe's category column.
class CategoryBalanceSampler final : public data::BatchSampler {
 public:
  CategoryBalanceSampler(const data::SamplerContext& context, const CategoryBalanceOptions& options);

  std::string name() const override { return "category_balance"; }
  int64_t size() const override { return epoch_size_; }
  int64_t batch_size() const override {
    return options_.n_categories * options_.n_labels * options_.n_instances;
  }
  std::vector<data::Batch> batches(int64_t epoch) const override;

 private:
  LabelGroups groups_;
  CategoryGroups categories_;
  CategoryBalanceOptions options_;
  std::vector<double> weights_;
  int64_t epoch_size_;
  int64_t seed_;
};

}  // namespace oml::samplers
