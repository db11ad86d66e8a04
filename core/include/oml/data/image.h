#pragma once
// Image decoding (OpenCV stays inside oml_core; callers see tensors).
//
// An image is a contiguous uint8 tensor [H, W, 3] in RGB order: grayscale, RGB and RGBA (alpha
// dropped) JPEG/PNG files all become 3 channels. EXIF orientation is ignored, as PIL does, so
// pixels match OML's Python loader.

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "oml/data/dataframe.h"

namespace oml::data {

/// Reads a whole file. Throws DataError naming the file when it cannot be read.
std::string read_file_bytes(const std::string& path);

/// Decodes encoded JPEG/PNG/BMP bytes into an RGB uint8 [H, W, 3] tensor. A corrupt file, or a
/// JPEG cut short (which libjpeg would otherwise decode with grey rows), is a DataError naming
/// `path`.
at::Tensor decode_image(const std::string& bytes, const std::string& path);

/// Crops `image` [H, W, 3] to `box` (x_2/y_2 exclusive). A box outside the image is a DataError
/// naming `path` and the image size.
at::Tensor crop_image(const at::Tensor& image, const BBox& box, const std::string& path);

/// Encodes an RGB uint8 [H, W, 3] (RGBA [H, W, 4], grayscale [H, W]) tensor as PNG or JPEG by the
/// extension of `path_for_format` (used by converters, tests and benchmarks).
std::string encode_image(const at::Tensor& image, const std::string& path_for_format, int jpeg_quality = 95);

}  // namespace oml::data
