#pragma once
// Initialisations the ViT families share.

#include <ATen/core/Tensor.h>

namespace oml::models::detail {

/// timm's and DINO's trunc_normal_(std) cut at +-2 (absolute), i.e. 100 standard deviations for
/// std 0.02: a normal draw clamped there has the same distribution for every practical purpose.
inline void trunc_normal(at::Tensor& t, double std) { t.normal_(0.0, std).clamp_(-2.0, 2.0); }

}  // namespace oml::models::detail
