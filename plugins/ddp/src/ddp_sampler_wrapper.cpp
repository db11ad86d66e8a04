#include "oml/ddp/ddp_sampler_wrapper.h"

#include <numeric>

#include "oml/common/error.h"
#include "oml/config/run_config.h"

namespace oml::ddp {

DdpSamplerOptions sampler_options(const config::DdpOptions& ddp) {
  return DdpSamplerOptions{ddp.shuffle_between_ranks, ddp.pad_to_world_size};
}

int64_t items_per_rank(int64_t n, int64_t world, bool pad_to_world_size) {
  return pad_to_world_size ? (n + world - 1) / world : n / world;
}

std::vector<int64_t> rank_positions(int64_t n, int64_t rank, int64_t world, const DdpSamplerOptions& options,
                                    uint64_t shuffle_seed) {
  OML_ASSERT(world >= 1 && rank >= 0 && rank < world, "rank ", rank, " world ", world);
  std::vector<int64_t> order;
  if (options.shuffle_between_ranks) {
    order = torch_randperm(n, shuffle_seed);
  } else {
    order.resize(n);
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t per_rank = items_per_rank(n, world, options.pad_to_world_size);
  std::vector<int64_t> out;
  out.reserve(per_rank);
  // Position p of the padded list is order[p % n]: padding repeats the list from its start,
  // cyclically when it is shorter than the padding (as DistributedSampler does).
  for (int64_t i = 0; i < per_rank; ++i) out.push_back(order[(rank + i * world) % n]);
  return out;
}

DDPSamplerWrapper::DDPSamplerWrapper(std::shared_ptr<const data::Sampler> sampler,
                                     const DdpSamplerOptions& options, int64_t rank, int64_t world,
                                     int64_t seed)
    : sampler_(std::move(sampler)), options_(options), rank_(rank), world_(world), seed_(seed) {
  OML_CHECK(sampler_ != nullptr, InternalError, "DDPSamplerWrapper: no sampler to wrap");
  OML_CHECK(world_ >= 1, UsageError, "world size must be >= 1, got ", world_);
  OML_CHECK(rank_ >= 0 && rank_ < world_, UsageError, "rank must be in [0, ", world_, "), got ", rank_);
  const int64_t n = sampler_->size();
  const int64_t per_rank = items_per_rank(n, world_, options_.pad_to_world_size);
  steps_ = sampler_->kind() == data::SamplerKind::batch
               ? per_rank
               : data::batch_count(per_rank, sampler_->batch_size(), sampler_->drop_last());
  OML_CHECK(
      steps_ > 0, ConfigError, "sampler '", sampler_->name(), "' yields ", n,
      sampler_->kind() == data::SamplerKind::batch ? " batches" : " items", " per epoch; split between ",
      world_, " ranks", options_.pad_to_world_size ? "" : " without padding",
      ", a rank gets no batch at all; use fewer ranks",
      options_.pad_to_world_size ? "" : ", set ddp.pad_to_world_size: true",
      sampler_->kind() == data::SamplerKind::batch ? " or a larger epoch_size" : " or a smaller batch_size");
}

std::vector<data::Batch> DDPSamplerWrapper::batches(int64_t epoch) const {
  const uint64_t shuffle_seed = static_cast<uint64_t>(seed_) + static_cast<uint64_t>(epoch);
  if (sampler_->kind() == data::SamplerKind::batch) {
    const std::vector<data::Batch> all = data::epoch_batches(*sampler_, epoch);
    std::vector<data::Batch> mine;
    mine.reserve(steps_);
    for (int64_t p :
         rank_positions(static_cast<int64_t>(all.size()), rank_, world_, options_, shuffle_seed)) {
      mine.push_back(all[p]);
    }
    return mine;
  }
  const auto& index_sampler = static_cast<const data::IndexSampler&>(*sampler_);
  const std::vector<int64_t> all = index_sampler.indices(epoch);
  OML_CHECK(static_cast<int64_t>(all.size()) == sampler_->size(), PluginError, "sampler '", sampler_->name(),
            "' produced ", all.size(), " indices for epoch ", epoch, ", but its size() says ",
            sampler_->size());
  std::vector<int64_t> mine;
  for (int64_t p : rank_positions(static_cast<int64_t>(all.size()), rank_, world_, options_, shuffle_seed)) {
    mine.push_back(all[p]);
  }
  return data::make_batches(mine, sampler_->batch_size(), sampler_->drop_last());
}

std::shared_ptr<const data::Sampler> wrap_for_world(std::shared_ptr<const data::Sampler> sampler,
                                                    const DdpSamplerOptions& options, int64_t rank,
                                                    int64_t world, int64_t seed) {
  OML_CHECK(world >= 1, UsageError, "world size must be >= 1, got ", world);
  if (world == 1) return sampler;
  return std::make_shared<DDPSamplerWrapper>(std::move(sampler), options, rank, world, seed);
}

}  // namespace oml::ddp
