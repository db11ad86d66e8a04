#include "oml/data/sampler_rng.h"

#include <limits>

#include "oml/common/error.h"
#include "oml/common/random.h"

namespace oml::data {

SamplerRng::SamplerRng(int64_t seed, int64_t epoch, uint64_t stream)
    : engine_(derive_seed(static_cast<uint64_t>(seed), {static_cast<uint64_t>(epoch), stream})) {}

uint64_t SamplerRng::below(uint64_t n) {
  OML_ASSERT(n > 0);
  // Rejects the top partial range so that every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return x % n;
}

double SamplerRng::unit() { return unit_interval(engine_()); }

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
