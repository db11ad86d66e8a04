#include "oml/common/random.h"

namespace oml {

namespace {
constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;
}  // namespace

uint64_t mix64(uint64_t value) {
  value += kGoldenGamma;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> keys) {
  uint64_t state = mix64(seed);
  for (const uint64_t key : keys) state = mix64(state ^ key);
  return state;
}

uint64_t SplitMix64::next() {
  const uint64_t out = mix64(state_);
  state_ += kGoldenGamma;
  return out;
}

}  // namespace oml
