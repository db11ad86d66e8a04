// The seeded generators, pinned to the values they drew when written: every sampler epoch and
// every augmentation is a function of these draws, so a change here silently changes the
// batches and images of every run (and breaks resuming from older checkpoints).
#include <numeric>
#include <random>
#include <vector>

#include "oml/common/random.h"
#include "oml/data/sampler_rng.h"
#include "oml/data/transform.h"
#include "support/support.h"

namespace random_tests {

using oml::data::KeyedRandom;
using oml::data::RandomKey;
using oml::data::SamplerRng;

TEST_CASE("SplitMix64 reproduces the reference generator's outputs for state 0", "[random]") {
  oml::SplitMix64 bits(0);
  CHECK(bits.next() == 0xE220A8397B1DCDAFull);
  CHECK(bits.next() == 0x6E789E6AA1B965F4ull);
  CHECK(bits.next() == 0x06C45D188009454Full);
  CHECK(bits.next() == 0xF88BB8A8724C81ECull);
  CHECK(oml::mix64(0) == 0xE220A8397B1DCDAFull);
}

TEST_CASE("derive_seed mixes the keys in one after another, in order", "[random]") {
  CHECK(oml::derive_seed(7, {}) == oml::mix64(7));
  CHECK(oml::derive_seed(7, {2, 3}) == oml::mix64(oml::mix64(oml::mix64(7) ^ 2) ^ 3));
  CHECK(oml::derive_seed(7, {2, 3}) != oml::derive_seed(7, {3, 2}));
  CHECK(oml::unit_interval(0) == 0.0);
  CHECK(oml::unit_interval(~uint64_t{0}) == 1.0 - 0x1.0p-53);
}

TEST_CASE("Samplers and transforms seed their generators with the same derive_seed", "[random]") {
  CHECK(KeyedRandom(RandomKey{7, 2, 3}).next_u64() == oml::SplitMix64(oml::derive_seed(7, {2, 3})).next());
  std::mt19937_64 engine(oml::derive_seed(42, {3, 1}));
  CHECK(SamplerRng(42, 3, 1).unit() == oml::unit_interval(engine()));
}

TEST_CASE("KeyedRandom draws the pinned sequence for a key", "[random][transforms]") {
  KeyedRandom random(RandomKey{7, 2, 3});
  CHECK(random.next_u64() == 0xE21D0A42D2165003ull);
  CHECK(random.next_u64() == 0xB9C750B2FA578647ull);
  CHECK(random.next_u64() == 0xB20E6A29EAE5E098ull);
  CHECK(random.uniform() == 0x1.2d32e8865a8ccp-3);
  CHECK(random.uniform(-2, 5) == -0x1.8d5dfba01c0b4p-1);
  CHECK(KeyedRandom(RandomKey{0, 0, 0}).next_u64() == 0x2130748AAAC80268ull);
}

TEST_CASE("SamplerRng draws the pinned values for (seed, epoch, stream)", "[random][samplers]") {
  SamplerRng random(42, 3, 1);
  std::vector<uint64_t> below;
  for (int i = 0; i < 5; ++i) below.push_back(random.below(1000));
  CHECK(below == std::vector<uint64_t>{799, 986, 707, 391, 581});
  CHECK(random.unit() == 0x1.20ec28e0b311cp-1);
  std::vector<int> order(10);
  std::iota(order.begin(), order.end(), 0);
  random.shuffle(order);
  CHECK(order == std::vector<int>{6, 4, 5, 2, 3, 7, 9, 0, 1, 8});

  SamplerRng other(-5, 0);
  CHECK(other.below(uint64_t{1} << 40) == 730154025340ull);
  CHECK(other.choose_weighted_distinct({1.0, 2.0, 3.0, 4.0}, 3) == std::vector<std::size_t>{2, 3, 1});
}

}  // namespace random_tests
