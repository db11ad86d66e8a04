#pragma once
// The DDP plugin's sampler wrapper (docs/contracts.md#ddp-sampler-wrapper): the share of one rank of
// any sampler's epoch.
//
//   auto sampler = samplers::build_sampler(config.sampler, context);
//   auto mine = ddp::wrap_for_world(sampler, {config.ddp.shuffle_between_ranks,
//                                             config.ddp.pad_to_world_size}, rank, world, seed);
//   for (const auto& batch : data::epoch_batches(*mine, epoch)) ...
//
// The wrapper draws the wrapped sampler's whole epoch (identical on every rank, because epochs
// are pure functions of (seed, epoch)) and keeps positions r, r + W, r + 2W, ... of it, after
// an optional shuffle and padding. Batch samplers are split by whole batches; index samplers by
// indices, and each rank then cuts its share into batches. Every rank runs the same number of
// steps, so no collective waits on a rank that ran out of data.

#include <cstdint>
#include <memory>
#include <vector>

#include "oml/data/sampler.h"

namespace oml::config {
struct DdpOptions;
}  // namespace oml::config

namespace oml::ddp {

/// The `ddp:` keys that shape sampling (defaults as OML's loader patching).
struct DdpSamplerOptions {
  /// Permute the epoch's items with torch.randperm(n) seeded with seed + epoch before splitting
  /// (exactly torch's DistributedSampler permutation).
  bool shuffle_between_ranks = false;
  /// Extend the list by repeating items from its start so every rank gets ceil(n / W) items;
  /// without it every rank gets floor(n / W) and the tail is dropped.
  bool pad_to_world_size = true;
};

/// The sampling part of a config's `ddp:` section.
DdpSamplerOptions sampler_options(const config::DdpOptions& ddp);

/// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU.
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

/// Items each rank receives from an epoch of n items: ceil(n / W) padded, floor(n / W) not.
int64_t items_per_rank(int64_t n, int64_t world, bool pad_to_world_size);

/// Positions (into the wrapped epoch's n items) that `rank` takes, in order; a position can
/// repeat when padding wraps around. `shuffle_seed` is seed + epoch.
std::vector<int64_t> rank_positions(int64_t n, int64_t rank, int64_t world, const DdpSamplerOptions& options,
                                    uint64_t shuffle_seed);

/// A batch sampler yielding one rank's batches of the wrapped sampler's epochs.
class DDPSamplerWrapper final : public data::BatchSampler {
 public:
  /// `seed` is the run's seed (the shuffle uses seed + epoch). Throws UsageError for a bad
  /// rank/world and ConfigError when, without padding, a rank would get no batch at all.
  DDPSamplerWrapper(std::shared_ptr<const data::Sampler> sampler, const DdpSamplerOptions& options,
                    int64_t rank, int64_t world, int64_t seed);

  /// The wrapped sampler's name (messages are about the sampler the user configured).
  std::string name() const override { return sampler_->name(); }
  /// Batches (steps) per epoch of this rank — the same on every rank.
  int64_t size() const override { return steps_; }
  int64_t batch_size() const override { return sampler_->batch_size(); }
  std::vector<data::Batch> batches(int64_t epoch) const override;

  const data::Sampler& wrapped() const { return *sampler_; }
  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }

 private:
  std::shared_ptr<const data::Sampler> sampler_;
  DdpSamplerOptions options_;
  int64_t rank_;
  int64_t world_;
  int64_t seed_;
  int64_t steps_;
};

/// What rank `rank` of `world` runs: the sampler itself when world == 1 (pipelines wrap only
/// multi-rank worlds), a DDPSamplerWrapper otherwise.
std::shared_ptr<const data::Sampler> wrap_for_world(std::shared_ptr<const data::Sampler> sampler,
                                                    const DdpSamplerOptions& options, int64_t rank,
                                                    int64_t world, int64_t seed);

}  // namespace oml::ddp
