#pragma once
// `balance`: P x K batches — P labels per batch, K items per label (docs/samplers.md).

#include <cstdint>
#include <optional>

#include "oml/data/sampler.h"
#include "oml/samplers/label_groups.h"

namespace oml::samplers {

/// Args of `balance`:
///   sampler: {name: balance, args: {n_labels: 8, n_instances: 4, epoch_size: 100}}
struct BalanceOptions {
  int64_t n_labels = 0;     ///< P: labels per batch; 1 < P <= L
  int64_t n_instances = 0;  ///< K: items per label; K > 1
  /// Batches per epoch; default L // P (OML), i.e. every label used once per epoch.
  std::optional<int64_t> epoch_size;
};

/// config::ArgumentError unless n_labels > 1, n_instances > 1, epoch_size >= 1 when given: what the args
/// alone can tell (the sampler's parse). What depends on the data is checked when the sampler is built.
void check_options(const BalanceOptions& options);

/// Each batch takes the next P labels of a shuffled pool of all labels and K items of each
/// (smart_sample: distinct items, repeats only for labels with fewer than K). When fewer than P
/// labels of the pool are left unused, the pool refills with all labels, freshly shuffled; with
/// the default epoch_size that never happens, so no label repeats within an epoch.
class BalanceSampler final : public data::BatchSampler {
 public:
  /// Throws ConfigError (P, K or epoch_size out of range) or DataError (a label with one item).
  BalanceSampler(const data::SamplerContext& context, const BalanceOptions& options);

  std::string name() const override { return "balance"; }
  int64_t size() const override { return epoch_size_; }
  int64_t batch_size() const override { return n_labels_ * n_instances_; }
  std::vector<data::Batch> batches(int64_t epoch) const override;

 private:
  LabelGroups groups_;
  int64_t n_labels_;
  int64_t n_instances_;
  int64_t epoch_size_;
  int64_t seed_;
};

}  // namespace oml::samplers
