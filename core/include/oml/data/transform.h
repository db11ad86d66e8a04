#pragma once
// Image transforms: registered components turning a decoded image into the model's input.
//
//   transforms_train: {name: augs, args: {im_size: 224, min_scale: 0.2}}
//   auto t = registries().transforms.create(spec, {});
//   at::Tensor x = t->apply(rgb_image, RandomKey{seed, epoch, dataset_index});
//
// Contract for implementations (built-in or plugin):
// - input: a contiguous RGB uint8 tensor [H, W, 3] (H, W >= 1), never modified;
// - output: a float32 tensor [3, H', W'] whose size depends only on the transform's options and
//   the input size (a batch stacks outputs, so fixed-size transforms are needed for batching);
// - randomness: a pure function of the RandomKey — no global RNG, no thread-local state — so
//   that results never depend on thread timing or on the number of loader workers;
// - `apply` is called concurrently from several loader threads: it must be const and
//   thread-safe.

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "oml/common/random.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::data {

/// Identifies one draw of an item's augmentation: the run seed, the epoch and the item's
/// dataset index.
struct RandomKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t index = 0;
};

/// A small deterministic generator (oml::SplitMix64 seeded with
/// oml::derive_seed(seed, {epoch, index}), oml/common/random.h); uniform draws are computed from
/// raw bits, so they are identical on every platform and standard library.
class KeyedRandom {
 public:
  explicit KeyedRandom(const RandomKey& key);
  uint64_t next_u64();
  /// Uniform in [lo, hi).
  double uniform(double lo = 0.0, double hi = 1.0);
  bool bernoulli(double p) { return uniform() < p; }
  /// Uniform integer in [lo, hi) (hi > lo).
  int64_t integer(int64_t lo, int64_t hi);
  /// Normal with the given mean and standard deviation (Box-Muller from two uniform draws; std::log
  /// and std::cos make it platform-dependent in the last bits, unlike uniform()).
  double normal(double mean = 0.0, double sigma = 1.0);

 private:
  SplitMix64 bits_;
};

class Transform {
 public:
  virtual ~Transform() = default;
  /// Transforms `image` (RGB uint8 [H, W, 3]) into float32 [3, H', W']; see the contract above.
  virtual at::Tensor apply(const at::Tensor& image, const RandomKey& key) const = 0;
  /// One line for logs, e.g. "norm_resize(im_size=224)".
  virtual std::string describe() const = 0;
};

/// ImageNet statistics, the default of every built-in transform.
inline constexpr std::array<double, 3> kImageNetMean{0.485, 0.456, 0.406};
inline constexpr std::array<double, 3> kImageNetStd{0.229, 0.224, 0.225};

/// Registers norm, resize, norm_resize, norm_resize_center_crop and augs, OML's names
/// (norm_torch, ..., augs_albu) and OML's per-weights names (vits16_dino, ...): docs/data.md.
void register_builtin_transforms(Registries& registries);

}  // namespace oml::data
