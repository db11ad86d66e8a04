#pragma once
// The deterministic mixing every seeded draw in oml-cpp starts from. Samplers
// (oml/data/sampler_rng.h) and transforms (oml/data/transform.h) derive their generators here,
// so "seed, epoch, item" means the same thing to both, and every value is a pure function of
// its keys: the same on every platform, standard library, rank, thread and resume.
//
//   uint64_t s = oml::derive_seed(seed, {epoch, index});   // one stream per (seed, epoch, index)
//   oml::SplitMix64 bits(s);
//   double u = oml::unit_interval(bits.next());            // uniform in [0, 1)

#include <cstdint>
#include <initializer_list>

namespace oml {

/// SplitMix64's step on `value`: adds the golden-ratio increment, then mixes. Nearby inputs give
/// unrelated outputs; mix64(0) is SplitMix64's first output for state 0 (0xE220A8397B1DCDAF).
uint64_t mix64(uint64_t value);

/// One seed from a run seed and further keys, mixed in one after another:
/// mix64(... mix64(mix64(seed) ^ key_1) ^ key_2 ...). The order of the keys matters.
uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> keys);

/// The top 53 bits of `bits` as a double in [0, 1): exact, hence as portable as the bits.
inline double unit_interval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// Sebastiano Vigna's SplitMix64 generator: the n-th output is mix64(state + n * increment).
/// Small and fast; used where a stream is short (an augmentation draws a handful of values).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next();

 private:
  uint64_t state_;
};

}  // namespace oml
