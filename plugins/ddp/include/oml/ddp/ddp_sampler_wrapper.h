#pragma once
// The DDP plugin's sampler wrapper (docs/contracts.md#ddp-sampler-wrapper): the one place that
// decides which batches a rank runs, for a fresh epoch and for the rest of an interrupted one.
//
//   const ddp::DDPSamplerWrapper mine(sampler, {shuffle, pad}, rank, world, seed);
//   for (const auto& batch : mine.batches(epoch)) ...                // a fresh epoch
//   for (const auto& batch : mine.batches_from(position)) ...        // the rest of one (resume)
//
// Every epoch is dealt out of one list, the epoch's *global order*: the wrapped sampler's n items
// (the batches of a batch sampler, the indices of an index sampler) -- identical on every rank,
// because epochs are pure functions of (seed, epoch) -- permuted by shuffle_between_ranks when the
// ranks that started the epoch were more than one, and padded by repeating it from its start. Rank
// r of W takes positions r, r + W, r + 2W, ...; batch samplers are split by whole batches, index
// samplers by indices, and each rank then cuts its share into batches. Every rank runs the same
// number of steps, so no collective waits on a rank that ran out of data. One rank runs exactly
// the unwrapped sampler. How a checkpoint's position maps onto this order: epoch_position.h.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oml/data/sampler.h"
#include "oml/ddp/epoch_position.h"

namespace oml::ddp {

/// A batch sampler yielding one rank's batches of the wrapped sampler's epochs.
class DDPSamplerWrapper final : public data::BatchSampler {
 public:
  /// `seed` is the run's seed (the shuffle uses seed + epoch). Throws UsageError for a bad
  /// rank/world and ConfigError when, without padding, a rank of several would get no batch.
  DDPSamplerWrapper(std::shared_ptr<const data::Sampler> sampler, const DdpSamplerOptions& options,
                    int64_t rank, int64_t world, int64_t seed);

  /// The wrapped sampler's name (messages are about the sampler the user configured).
  std::string name() const override { return sampler_->name(); }
  /// Batches (steps) of a fresh epoch of this rank — the same on every rank.
  int64_t size() const override { return steps_; }
  int64_t batch_size() const override { return sampler_->batch_size(); }
  /// This rank's share of a fresh epoch: batches_from({epoch, 0, world}).
  std::vector<data::Batch> batches(int64_t epoch) const override;

  /// This rank's batches for the rest of `position.epoch`, which `position.world_size` ranks
  /// started (they fixed its order and its end) and of whose global order `position.consumed`
  /// items are consumed: what the uninterrupted run would still have consumed, dealt out to this
  /// wrapper's ranks as a fresh epoch is, and padded with the order's first items when they do not
  /// share it equally. The same number of batches on every rank. Throws DataError when the
  /// position does not fit the epoch (the data or the sampler config changed since the checkpoint
  /// was written, or it is damaged), and ConfigError when, without padding, these ranks cannot
  /// share the rest equally without skipping items (the message names the world sizes that can).
  /// With `epoch_digest`, also a 64-bit digest of the sampler's whole epoch as drawn (before it
  /// is dealt out), for the ranks to compare: a sampler that is not a pure function of (seed,
  /// epoch, data) gives each rank its share of a different epoch.
  std::vector<data::Batch> batches_from(const EpochPosition& position,
                                        uint64_t* epoch_digest = nullptr) const;

  /// Items of the global order one step of these ranks consumes (items_per_step).
  int64_t items_per_step() const { return ddp::items_per_step(*sampler_, world_); }

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

}  // namespace oml::ddp
