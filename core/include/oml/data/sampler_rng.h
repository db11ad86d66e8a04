#pragma once
// The random generator samplers draw from, and the sampling helpers built on it.
//
// Why not std::uniform_int_distribution / std::shuffle: their algorithms are left to the
// standard library, so the same seed gives different epochs with libstdc++ and libc++. Every
// draw here goes through std::mt19937_64 (whose output sequence the standard fixes) and our own
// unbiased bounded draw, so an epoch is the same on every platform, rank and resume.

#include <cstdint>
#include <random>
#include <vector>

namespace oml::data {

class SamplerRng {
 public:
  /// The generator of epoch `epoch` for run seed `seed`, seeded with
  /// oml::derive_seed(seed, {epoch, stream}) (oml/common/random.h). `stream` separates
  /// independent draws of one sampler (0 unless a sampler needs several).
  SamplerRng(int64_t seed, int64_t epoch, uint64_t stream = 0);

  /// Uniform in [0, n), n >= 1, without modulo bias.
  uint64_t below(uint64_t n);
  /// Uniform in [0, 1).
  double unit();

  /// Fisher-Yates shuffle in place.
  template <class T>
  void shuffle(std::vector<T>& values) {
    for (std::size_t i = values.size(); i > 1; --i) {
      std::swap(values[i - 1], values[below(i)]);
    }
  }

  /// `k` distinct elements of `values` in random order (k <= values.size()).
  template <class T>
  std::vector<T> choose_distinct(std::vector<T> values, std::size_t k) {
    // Partial Fisher-Yates: the first k slots end up a uniform random k-permutation.
    for (std::size_t i = 0; i < k; ++i) {
      std::swap(values[i], values[i + below(values.size() - i)]);
    }
    values.resize(k);
    return values;
  }

  /// smart_sample (docs/contracts.md#sampler): k distinct elements when values.size() >= k;
  /// otherwise all of them in random order followed by k - size elements drawn with replacement.
  /// `values` non-empty.
  template <class T>
  std::vector<T> smart_sample(const std::vector<T>& values, std::size_t k) {
    if (values.size() >= k) return choose_distinct(values, k);
    std::vector<T> out = values;
    shuffle(out);
    while (out.size() < k) out.push_back(values[below(values.size())]);
    return out;
  }

  /// `k` distinct positions in [0, weights.size()), each draw proportional to the weights of
  /// the positions not drawn yet (numpy's choice(replace=False, p=weights)). Weights > 0,
  /// k <= weights.size().
  std::vector<std::size_t> choose_weighted_distinct(const std::vector<double>& weights, std::size_t k);

 private:
  std::mt19937_64 engine_;
};

}  // namespace oml::data
