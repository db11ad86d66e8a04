#include "oml/ddp/ddp_sampler_wrapper.h"

#include <limits>
#include <numeric>

#include "oml/common/error.h"

namespace oml::ddp {

namespace {

bool is_index(const data::Sampler& sampler) { return sampler.kind() == data::SamplerKind::index; }

std::string item_word(const data::Sampler& sampler) { return is_index(sampler) ? "indices" : "batches"; }

/// The epoch's n items in the order the `world` ranks that start it deal them: permuted with
/// torch.randperm(n) seeded with seed + epoch (DistributedSampler's permutation), never for one
/// rank, which runs the sampler's own order.
std::vector<int64_t> global_order(int64_t n, int64_t world, const DdpSamplerOptions& options,
                                  uint64_t shuffle_seed) {
  if (world > 1 && options.shuffle_between_ranks) return torch_randperm(n, shuffle_seed);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

uint64_t shuffle_seed(int64_t seed, int64_t epoch) {
  return static_cast<uint64_t>(seed) + static_cast<uint64_t>(epoch);
}

/// The smallest number of items `world` ranks can share so that each rank runs the same number
/// of steps and none of them is dropped: every rank the same share, and with drop_last a share of
/// whole batches.
int64_t share_unit(const data::Sampler& sampler, int64_t world) {
  return is_index(sampler) && sampler.drop_last() ? sampler.batch_size() * world : world;
}

/// "1, 2 or 4": the world sizes up to 64 that share `remaining` items exactly.
std::string worlds_that_divide(const data::Sampler& sampler, int64_t remaining) {
  std::vector<std::string> worlds;
  for (int64_t w = 1; w <= 64 && share_unit(sampler, w) <= remaining; ++w) {
    if (remaining % share_unit(sampler, w) == 0) worlds.push_back(std::to_string(w));
  }
  std::string out;
  for (std::size_t i = 0; i < worlds.size(); ++i) {
    if (i > 0) out += i + 1 == worlds.size() ? " or " : ", ";
    out += worlds[i];
  }
  return out;
}

}  // namespace

DDPSamplerWrapper::DDPSamplerWrapper(std::shared_ptr<const data::Sampler> sampler,
                                     const DdpSamplerOptions& options, int64_t rank, int64_t world,
                                     int64_t seed)
    : sampler_(std::move(sampler)), options_(options), rank_(rank), world_(world), seed_(seed) {
  OML_CHECK(sampler_ != nullptr, InternalError, "DDPSamplerWrapper: no sampler to wrap");
  OML_CHECK(world_ >= 1, UsageError, "world size must be >= 1, got ", world_);
  OML_CHECK(rank_ >= 0 && rank_ < world_, UsageError, "rank must be in [0, ", world_, "), got ", rank_);
  const int64_t n = sampler_->size();
  const int64_t per_rank = items_per_rank(n, world_, options_.pad_to_world_size);
  steps_ = is_index(*sampler_) ? data::batch_count(per_rank, sampler_->batch_size(), sampler_->drop_last())
                               : per_rank;
  // One rank runs the sampler as it is, whatever its size (the sampler checked it).
  OML_CHECK(steps_ > 0 || world_ == 1, ConfigError, "sampler '", sampler_->name(), "' yields ", n, " ",
            item_word(*sampler_), " per epoch; split between ", world_, " ranks",
            options_.pad_to_world_size ? "" : " without padding",
            ", a rank gets no batch at all. Use fewer ranks",
            options_.pad_to_world_size ? "" : ", set ddp.pad_to_world_size: true",
            is_index(*sampler_) ? " or a smaller batch_size" : " or a larger epoch_size");
}

std::vector<data::Batch> DDPSamplerWrapper::batches(int64_t epoch) const {
  return batches_from({epoch, 0, world_});
}

std::vector<data::Batch> DDPSamplerWrapper::batches_from(const EpochPosition& position,
                                                         uint64_t* epoch_digest) const {
  const data::Sampler& sampler = *sampler_;
  // The position comes from a checkpoint: one that does not fit is the user's to fix (exit 2).
  // c10d numbers ranks with ints, so no real world is larger.
  OML_CHECK(position.world_size >= 1 && position.world_size <= std::numeric_limits<int32_t>::max(), DataError,
            "cannot resume sampler '", sampler.name(), "' at epoch ", position.epoch,
            ": the checkpoint says the epoch was started by ", position.world_size,
            " ranks (a damaged checkpoint?)");
  const int64_t end = items_per_epoch(sampler, options_, position.world_size);
  OML_CHECK(position.epoch >= 0 && position.consumed >= 0 && position.consumed <= end, DataError,
            "cannot resume sampler '", sampler.name(), "' at epoch ", position.epoch, " after ",
            position.consumed, " of its ", item_word(sampler), ": its epochs on ", position.world_size,
            " rank(s) consume ", end,
            ". The data or the sampler config changed since the checkpoint was written");

  // The rest: what the uninterrupted run on position.world_size ranks would still consume,
  // padded to a multiple of the share unit (without padding it must be one already).
  const int64_t remaining = end - position.consumed;
  const int64_t unit = share_unit(sampler, world_);
  if (!options_.pad_to_world_size && remaining % unit != 0) {
    const std::string word = item_word(sampler);
    const std::string worlds = worlds_that_divide(sampler, remaining);
    const std::string share = unit == world_ ? std::string("equally")
                                             : "in whole batches of " + std::to_string(sampler.batch_size());
    const std::string fix = worlds.empty() ? std::string("Set") : "Resume on " + worlds + " rank(s), or set";
    throw ConfigError(detail::concat(
        "cannot continue epoch ", position.epoch, " of sampler '", sampler.name(), "' exactly on ", world_,
        " rank(s): ", remaining, " of its ", word, " remain after the ", position.consumed,
        " consumed (in the order of the ", position.world_size,
        " rank(s) that started the epoch), and without padding (ddp.pad_to_world_size: false) ", world_,
        " rank(s) cannot share them ", share, " without skipping ", word, ". ", fix,
        " ddp.pad_to_world_size: true (a few ", word,
        " are then repeated), or resume from a checkpoint written at the end of an epoch"));
  }
  const int64_t per_rank = (remaining + unit - 1) / unit * unit / world_;

  const int64_t n = sampler.size();
  // The sampler's epoch first: one whose size() overstates it is refused before an order of
  // size() items is allocated.
  std::vector<data::Batch> all_batches;
  std::vector<int64_t> all_indices;
  if (is_index(sampler)) {
    all_indices = data::epoch_indices(static_cast<const data::IndexSampler&>(sampler), position.epoch);
  } else {
    all_batches = data::epoch_batches(sampler, position.epoch);
  }
  if (epoch_digest != nullptr) {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the indices, a batch's end marked by -1
    const auto add = [&h](int64_t v) {
      for (int byte = 0; byte < 8; ++byte)
        h = (h ^ ((static_cast<uint64_t>(v) >> (8 * byte)) & 0xFF)) * 0x100000001b3ULL;
    };
    for (const int64_t i : all_indices) add(i);
    for (const data::Batch& batch : all_batches) {
      for (const int64_t i : batch) add(i);
      add(-1);
    }
    *epoch_digest = h;
  }
  const std::size_t drawn = is_index(sampler) ? all_indices.size() : all_batches.size();
  OML_CHECK(static_cast<int64_t>(drawn) == n, PluginError, "sampler '", sampler.name(), "' produced ", drawn,
            " ", item_word(sampler), " for epoch ", position.epoch, ", but its size() said ", n,
            " a moment before");
  const std::vector<int64_t> order =
      global_order(n, position.world_size, options_, shuffle_seed(seed_, position.epoch));
  // Item i of the rest is position consumed + i of the order; past the rest, padding repeats the
  // order from its start (n > 0 whenever anything is padded). This rank takes i = rank + j x world.
  auto item = [&](int64_t j) {
    const int64_t i = rank_ + j * world_;
    return order[i < remaining ? position.consumed + i : (i - remaining) % n];
  };
  if (!is_index(sampler)) {
    std::vector<data::Batch> mine;
    mine.reserve(per_rank);
    for (int64_t j = 0; j < per_rank; ++j) mine.push_back(all_batches[item(j)]);
    return mine;
  }
  std::vector<int64_t> mine;
  mine.reserve(per_rank);
  for (int64_t j = 0; j < per_rank; ++j) mine.push_back(all_indices[item(j)]);
  // With drop_last the share is whole batches (share_unit), so nothing is dropped here.
  return data::make_batches(mine, sampler.batch_size(), sampler.drop_last());
}

}  // namespace oml::ddp
