#include "oml/data/sampler.h"

#include <algorithm>

#include "oml/common/error.h"

namespace oml::data {

// Out-of-line destructors anchor the vtables and type information in liboml_core, so that
// plugin samplers (built with hidden visibility) share them with the host.
Sampler::~Sampler() = default;
IndexSampler::~IndexSampler() = default;
BatchSampler::~BatchSampler() = default;

int64_t SamplerContext::label_value(int64_t label) const {
  if (label >= 0 && label < static_cast<int64_t>(label_values.size())) return label_values[label];
  return label;
}

int64_t batch_count(int64_t n, int64_t batch_size, bool drop_last) {
  OML_ASSERT(batch_size > 0, "batch_size ", batch_size);
  return drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

std::vector<Batch> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last) {
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t count = batch_count(n, batch_size, drop_last);
  std::vector<Batch> out;
  out.reserve(count);
  for (int64_t b = 0; b < count; ++b) {
    const int64_t begin = b * batch_size;
    const int64_t end = std::min(n, begin + batch_size);
    out.emplace_back(indices.begin() + begin, indices.begin() + end);
  }
  return out;
}

std::vector<Batch> epoch_batches(const Sampler& sampler, int64_t epoch) {
  // A sampler whose epoch disagrees with its size() would give ranks different step counts
  // (a hang under DDP) or a wrong progress bar; catch it here, naming the sampler.
  if (sampler.kind() == SamplerKind::batch) {
    std::vector<Batch> batches = static_cast<const BatchSampler&>(sampler).batches(epoch);
    OML_CHECK(static_cast<int64_t>(batches.size()) == sampler.size(), PluginError, "sampler '",
              sampler.name(), "' produced ", batches.size(), " batches for epoch ", epoch,
              ", but its size() says ", sampler.size());
    return batches;
  }
  std::vector<int64_t> indices = static_cast<const IndexSampler&>(sampler).indices(epoch);
  OML_CHECK(static_cast<int64_t>(indices.size()) == sampler.size(), PluginError, "sampler '", sampler.name(),
            "' produced ", indices.size(), " indices for epoch ", epoch, ", but its size() says ",
            sampler.size());
  return make_batches(indices, sampler.batch_size(), sampler.drop_last());
}

int64_t batches_per_epoch(const Sampler& sampler) {
  if (sampler.kind() == SamplerKind::batch) return sampler.size();
  return batch_count(sampler.size(), sampler.batch_size(), sampler.drop_last());
}

}  // namespace oml::data
