#pragma once
// An epoch's global order and positions in it (docs/ddp.md#resuming-on-another-number-of-ranks):
// the arithmetic that DDPSamplerWrapper deals by and that a checkpoint records.
//
// The wrapper deals every epoch out of one list, the epoch's global order (ddp_sampler_wrapper.h).
// One training step of W ranks consumes the next W batches, or W x batch_size indices, of it,
// whichever rank took which: after s steps the first s x items_per_step(sampler, W) items are
// consumed. That count and the world size that fixed the order (EpochPosition) are all a
// checkpoint needs to store, and any number of ranks can take the rest
// (DDPSamplerWrapper::batches_from).

#include <cstdint>
#include <vector>

#include "oml/data/sampler.h"

namespace oml::ddp {

/// The `ddp:` keys that shape sampling (defaults as OML's loader patching).
struct DdpSamplerOptions {
  /// Permute the epoch's items with torch.randperm(n) seeded with seed + epoch before splitting
  /// (exactly torch's DistributedSampler permutation), when the epoch is started by several ranks.
  bool shuffle_between_ranks = false;
  /// Extend the list by repeating items from its start so every rank gets ceil(n / W) items;
  /// without it every rank gets floor(n / W) and the tail is dropped.
  bool pad_to_world_size = true;
};

/// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU.
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

/// Items each rank receives from an epoch of n items: ceil(n / W) padded, floor(n / W) not.
int64_t items_per_rank(int64_t n, int64_t world, bool pad_to_world_size);

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

}  // namespace oml::ddp
