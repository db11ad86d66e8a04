#pragma once
// Resizing as Pillow does it (Image.resize on 8-bit images), which is what torchvision's
// transforms do to a PIL image: the pixels a zoo model saw in Python.
//
//   at::Tensor small = oml::data::resize_like_pil(rgb, 224, 224, oml::data::PilFilter::bicubic);
//
// The algorithm (Pillow's libImaging/Resample.c, re-derived here): a separable convolution, first
// along rows then along columns, each output pixel a weighted sum of the input pixels whose
// centres fall within `support * max(1, in/out)` of the output pixel's centre mapped into the
// input. The filter is stretched by the downscale factor (antialiasing), its weights normalised
// to sum 1 and turned into 22-bit fixed point; each pass rounds and clips to uint8, as Pillow's
// 8-bit path does. Triangle filter (support 1) for bilinear, Keys' cubic with a = -0.5
// (support 2) for bicubic.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace oml::data {

enum class PilFilter { bilinear, bicubic };

/// A read-only interleaved uint8 image (e.g. an OpenCV ROI): `channels` bytes per pixel,
/// `row_stride` bytes from one row to the next.
struct ImageView {
  const uint8_t* data = nullptr;
  int height = 0;
  int width = 0;
  int channels = 3;
  std::ptrdiff_t row_stride = 0;
};

/// Resizes `src` to `out_height` x `out_width`, writing an interleaved contiguous image
/// (out_height * out_width * channels bytes) to `out`. Equal sizes copy the pixels.
void resize_like_pil(const ImageView& src, int out_height, int out_width, PilFilter filter, uint8_t* out);

/// The same on a uint8 [H, W, C] tensor; returns a new contiguous uint8 [height, width, C] tensor.
at::Tensor resize_like_pil(const at::Tensor& image, int64_t height, int64_t width, PilFilter filter);

}  // namespace oml::data
