#include "oml/ddp/epoch_position.h"

#include <algorithm>

#include "oml/common/error.h"

namespace oml::ddp {

int64_t items_per_rank(int64_t n, int64_t world, bool pad_to_world_size) {
  return n / world + (pad_to_world_size && n % world != 0 ? 1 : 0);  // no n + world - 1: it may overflow
}

int64_t items_per_step(const data::Sampler& sampler, int64_t world) {
  return sampler.kind() == data::SamplerKind::index ? sampler.batch_size() * world : world;
}

int64_t items_per_epoch(const data::Sampler& sampler, const DdpSamplerOptions& options, int64_t world) {
  OML_ASSERT(world >= 1, "world ", world);
  const int64_t n = sampler.size();
  const int64_t per_rank = items_per_rank(n, world, options.pad_to_world_size);
  int64_t dealt = per_rank * world;
  if (sampler.kind() == data::SamplerKind::index && sampler.drop_last())
    dealt = data::batch_count(per_rank, sampler.batch_size(), true) * sampler.batch_size() * world;
  return std::min(dealt, n);  // padding repeats items; it adds none
}

}  // namespace oml::ddp
