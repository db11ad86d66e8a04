#include "oml/samplers/balance_sampler.h"

#include <numeric>

#include "oml/data/sampler_rng.h"

namespace oml::samplers {

void check_options(const BalanceOptions& options) {
  const std::string sampler = "balance";
  if (options.n_labels <= 1)
    fail_argument(sampler, "n_labels", "n_labels must be > 1, got ", options.n_labels);
  if (options.n_instances <= 1) {
    fail_argument(sampler, "n_instances", "n_instances must be > 1 (a batch needs positive pairs), got ",
                  options.n_instances);
  }
  if (options.epoch_size && *options.epoch_size < 1) {
    fail_argument(sampler, "epoch_size", "epoch_size (batches per epoch) must be >= 1, got ",
                  *options.epoch_size);
  }
}

BalanceSampler::BalanceSampler(const data::SamplerContext& context, const BalanceOptions& options)
    : n_labels_(options.n_labels), n_instances_(options.n_instances), seed_(context.seed) {
  check_options(options);
  groups_ = LabelGroups::build(context, name());
  const int64_t n_labels_total = groups_.count();
  if (n_labels_ > n_labels_total) {
    fail_fit(name(), "n_labels", "n_labels must satisfy 1 < n_labels <= ", n_labels_total,
             " (the number of labels in ", context.source, "), got ", n_labels_);
  }
  // Checked after the arguments so that a bad argument is reported first.
  groups_.require_items_per_label(context, name(), 2);
  epoch_size_ = options.epoch_size.value_or(n_labels_total / n_labels_);
}

std::vector<data::Batch> BalanceSampler::batches(int64_t epoch) const {
  data::SamplerRng rng(seed_, epoch);
  std::vector<int64_t> pool(groups_.count());
  std::iota(pool.begin(), pool.end(), int64_t{0});
  rng.shuffle(pool);
  std::size_t next = 0;

  std::vector<data::Batch> out;
  out.reserve(epoch_size_);
  for (int64_t b = 0; b < epoch_size_; ++b) {
    if (pool.size() - next < static_cast<std::size_t>(n_labels_)) {
      rng.shuffle(pool);  // the pool refills: every label is unused again
      next = 0;
    }
    data::Batch batch;
    batch.reserve(n_labels_ * n_instances_);
    for (int64_t p = 0; p < n_labels_; ++p) {
      const auto items = rng.smart_sample(groups_.rows[pool[next++]], n_instances_);
      batch.insert(batch.end(), items.begin(), items.end());
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace oml::samplers
