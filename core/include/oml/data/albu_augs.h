#pragma once
// augs_albu: OML's training augmentations for CUB and CARS (get_augs_albu in OML's
// pipelines/features_extraction/extractor_{cub,cars}/train_*.py, albumentations 1.3.1),
// re-implemented with OpenCV and drawn from the item's RandomKey.
//
//   transforms_train: {name: augs_albu, args: {im_size: 224}}
//
// The same steps, probabilities and parameter ranges as OML's (docs/data.md#augs_albu lists
// them and how the pixels differ): longest side to im_size + white padding, horizontal flip
// (p 0.5), then one of each group with the group's probability — spatial (0.5), blur (0.5),
// colour (0.8), channels (0.2), noise (0.25) — then albumentations' Normalize.

#include <string>

#include "oml/data/transform.h"

namespace oml::data {

/// Which operations augs_albu applies to one item: "" where a group is skipped. The draws that
/// choose them come first from the item's KeyedRandom; the operations' parameters follow.
struct AlbuAugsPlan {
  bool hflip = false;
  std::string spatial;  ///< perspective, affine, grid_distortion
  std::string blur;     ///< motion_blur, median_blur, blur, gaussian_blur
  std::string
      colour;  ///< color_jitter, hue_saturation_value, clahe, sharpen, emboss, random_brightness_contrast
  std::string channels;  ///< channel_dropout, to_gray, channel_shuffle
  std::string noise;     ///< coarse_dropout, gauss_noise
};

/// The choices augs_albu makes for `key` (what its apply() does with the same key).
AlbuAugsPlan albu_augs_plan(const RandomKey& key);

}  // namespace oml::data
