#include "oml/data/sampler.h"

#include <algorithm>
#include <limits>

#include "oml/common/error.h"
#include "oml/data/sampler_rng.h"

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

std::vector<Batch> remaining_batches(const Sampler& sampler, const SamplerPosition& position) {
  const int64_t total = batches_per_epoch(sampler);
  OML_CHECK(position.epoch >= 0 && position.step >= 0 && position.step <= total, RuntimeError,
            "cannot resume sampler '", sampler.name(), "' at epoch ", position.epoch, ", step ",
            position.step, ": its epochs have ", total,
            " batches; the data or the sampler config changed since the checkpoint was written");
  std::vector<Batch> batches = epoch_batches(sampler, position.epoch);
  batches.erase(batches.begin(), batches.begin() + position.step);
  return batches;
}

// ---- SamplerRng ---------------------------------------------------------------------------

uint64_t mix_seed(uint64_t value) {
  value += 0x9E3779B97F4A7C15ull;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

SamplerRng::SamplerRng(int64_t seed, int64_t epoch, uint64_t stream)
    : engine_(mix_seed(mix_seed(mix_seed(static_cast<uint64_t>(seed)) ^ static_cast<uint64_t>(epoch)) ^
                       stream)) {}

uint64_t SamplerRng::below(uint64_t n) {
  OML_ASSERT(n > 0);
  // Rejects the top partial range so that every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return x % n;
}

double SamplerRng::unit() {
  // 53 random bits -> a double in [0, 1), exactly as portable as the engine itself.
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

std::vector<std::size_t> SamplerRng::choose_weighted_distinct(const std::vector<double>& weights,
                                                              std::size_t k) {
  OML_ASSERT(k <= weights.size(), "k ", k, " > ", weights.size());
  std::vector<double> remaining = weights;
  double total = 0;
  for (double w : remaining) {
    OML_ASSERT(w > 0, "weight ", w);
    total += w;
  }
  std::vector<std::size_t> out;
  out.reserve(k);
  for (std::size_t drawn = 0; drawn < k; ++drawn) {
    const double target = unit() * total;
    double cumulative = 0;
    std::size_t chosen = remaining.size();
    std::size_t last_left = remaining.size();
    for (std::size_t i = 0; i < remaining.size(); ++i) {
      if (remaining[i] <= 0) continue;
      last_left = i;
      cumulative += remaining[i];
      if (target < cumulative) {
        chosen = i;
        break;
      }
    }
    // Rounding can leave target just above the last cumulative sum: take the last candidate.
    if (chosen == remaining.size()) chosen = last_left;
    out.push_back(chosen);
    total -= remaining[chosen];
    remaining[chosen] = 0;
  }
  return out;
}

}  // namespace oml::data
