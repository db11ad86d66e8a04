#pragma once
// Where a run stands in an epoch's global order, and how any number of ranks continues from there
// (docs/ddp.md#resuming-on-another-number-of-ranks).
//
// The DDP wrapper deals every epoch out of one list, the epoch's *global order*: the wrapped
// sampler's n items (the batches of a batch sampler, the indices of an index sampler), permuted by
// ddp.shuffle_between_ranks when the world has more than one rank, and padded by repeating it from
// its start. Rank r of W takes positions r, r + W, ...; for index samplers each rank then cuts its
// share into batches. So one training step of W ranks consumes the next W batches, or W x
// batch_size indices, of the global order, whichever rank took which: after s steps the first
// s x items_per_step(sampler, W) items are consumed. That count and the world size that fixed the
// order are all a checkpoint needs to store, and any number of ranks can take the rest:
//
//   // a fresh epoch: exactly DDPSamplerWrapper(sampler, options, rank, world, seed).batches(epoch)
//   auto mine = ddp::remaining_rank_batches(*sampler, options, seed, {epoch, 0, world}, rank, world);
//   // a checkpoint written by W ranks after s steps, continued on this run's `world` ranks
//   auto rest = ddp::remaining_rank_batches(*sampler, options, seed,
//                                           {epoch, s * ddp::items_per_step(*sampler, W), W}, rank, world);
//
// The rest is what the uninterrupted run on the position's world size would still have consumed
// (items_per_epoch), in order, dealt out as the wrapper deals (rank r takes r, r + world, ...);
// when `world` does not divide it, it is padded with the global order's first items, as the
// wrapper pads. Over the epoch, every item of the uninterrupted run is consumed once, plus padding.

#include <cstdint>
#include <vector>

#include "oml/data/sampler.h"
#include "oml/ddp/ddp_sampler_wrapper.h"

namespace oml::ddp {

/// How far an epoch has been consumed, independently of the number of ranks that consume it.
struct EpochPosition {
  int64_t epoch = 0;
  /// Items of the epoch's global order consumed so far, by all ranks together: batches of a
  /// batch sampler, indices of an index sampler.
  int64_t consumed = 0;
  /// Ranks of the run that started the epoch: they fixed its order (one rank shuffles nothing)
  /// and its end (what padding, truncation and drop_last leave of it).
  int64_t world_size = 1;
};

/// Items of the global order one training step of `world` ranks consumes: `world` batches of a
/// batch sampler, world x batch_size() indices of an index sampler (the last step of an epoch may
/// consume fewer).
int64_t items_per_step(const data::Sampler& sampler, int64_t world);

/// Distinct items of an epoch's global order that a run on `world` ranks consumes: all n of them
/// with ddp.pad_to_world_size, the first floor(n / world) x world without; for an index sampler
/// with drop_last, only those that fill whole batches on every rank.
int64_t items_per_epoch(const data::Sampler& sampler, const DdpSamplerOptions& options, int64_t world);

/// Rank `rank` of `world`'s batches for the rest of `position.epoch` (see the top of this file);
/// the same number on every rank. `sampler` is the configured sampler, unwrapped; `seed` the
/// run's seed. Throws DataError when the position does not fit the epoch (the data or the
/// sampler config changed since the checkpoint was written, or it is damaged), and ConfigError
/// when, without padding, `world` ranks cannot share the rest equally without skipping items
/// (the message names the world sizes that can).
std::vector<data::Batch> remaining_rank_batches(const data::Sampler& sampler,
                                                const DdpSamplerOptions& options, int64_t seed,
                                                const EpochPosition& position, int64_t rank, int64_t world);

}  // namespace oml::ddp
