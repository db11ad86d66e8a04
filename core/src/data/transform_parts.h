#pragma once
// Pieces shared by the built-in transforms (transform.cpp, oml_transforms.cpp, albu_augs.cpp);
// not part of the public API.

#include <ATen/core/Tensor.h>

#include <array>
#include <memory>
#include <opencv2/core.hpp>
#include <string>
#include <utility>
#include <vector>

#include "oml/config/reader.h"
#include "oml/data/resample.h"
#include "oml/data/transform.h"
#include "oml/registry/registry.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::data::detail {

struct Normalisation {
  std::vector<double> mean{kImageNetMean.begin(), kImageNetMean.end()};
  std::vector<double> std{kImageNetStd.begin(), kImageNetStd.end()};
};

/// CLIP's statistics (OML's MEAN_CLIP / STD_CLIP), for the *_clip and unicom transforms.
inline constexpr std::array<double, 3> kClipMean{0.48145466, 0.4578275, 0.40821073};
inline constexpr std::array<double, 3> kClipStd{0.26862954, 0.26130258, 0.27577711};

/// Reads `mean` and `std`.
void read_normalisation(config::MapReader& reader, Normalisation& norm);
/// ConfigError at the key unless `mean` and `std` have 3 values each and std > 0 (the value
/// checks below run in a parse's ArgsReader::check, after every key is read).
void check_normalisation(const config::Node& args, const Normalisation& norm);
void check_positive(const config::Node& args, const std::string& key, int64_t value);
void check_range(const config::Node& args, const std::string& key, double value, double lo, double hi);
std::string describe_norm(const Normalisation& n);

/// A non-owning OpenCV view of a contiguous RGB uint8 [H, W, 3] tensor.
cv::Mat as_mat(const at::Tensor& image);
/// UsageError unless `image` is an RGB uint8 [H, W, 3] tensor with H, W >= 1.
void check_input(const at::Tensor& image);

/// (x / 255 - mean) / std per channel of an RGB uint8 or float [0, 255] image, as float [3, H, W].
at::Tensor normalise(const cv::Mat& rgb, const Normalisation& n);

/// Whose float32 arithmetic normalise_u8 reproduces: torchvision's ToTensor + Normalize
/// ((x / 255 - mean) / std) or albumentations' Normalize ((x - 255 mean) * (1 / (255 std))).
enum class NormStyle { torchvision, albumentations };
/// normalise() of a uint8 image, through a per-channel table computed with that library's float32
/// operations in its order, so the values are those of the library (to the last bit where the
/// library's own kernels round as plain float32 does).
at::Tensor normalise_u8(const cv::Mat& rgb, const Normalisation& n, NormStyle style);

/// The most pixels a transform resizes an image to: 2^26 (192 MiB of RGB). An image decoded
/// within max_image_pixels can still ask for far more when it is elongated: a 1 x 65535 PNG of
/// 200 bytes resized so that its shorter side is 256 would be 256 x 16,776,960 (12.9 GB).
inline constexpr double kMaxResizedPixels = 67108864.0;
/// {width, height} = the given sizes (computed in double, so nothing overflows) as ints, or a
/// DataError saying `transform` would resize the src_width x src_height image past
/// kMaxResizedPixels (the dataset names the file).
std::pair<int, int> checked_resize(double width, double height, int src_width, int src_height,
                                   const std::string& transform);

/// Pillow's resize of an RGB uint8 image or ROI (oml/data/resample.h).
cv::Mat resize_pil(const cv::Mat& src, int width, int height, PilFilter filter);

/// albumentations' LongestMaxSize(size) (sides rounded half to even, cv2 INTER_LINEAR) followed by
/// PadIfNeeded(size, size) with white, centred: norm_resize_albu's geometry, also augs_albu's first.
cv::Mat longest_side_pad(const cv::Mat& src, int size);

/// The args of most transforms: an image size and mean/std.
struct SizedNorm {
  int im_size = 224;
  Normalisation norm;
};

/// Reads `im_size` (required, or over the default 224) and mean/std, and checks them.
SizedNorm parse_sized_norm(config::ArgsReader& reader, bool im_size_required);

/// augs_albu (albu_augs.cpp).
std::shared_ptr<Transform> make_augs_albu(const SizedNorm& args);

/// Registers OML's transform names (norm_torch, ..., augs_albu) and its per-weights names
/// (vits16_dino, resnet50_imagenet1k_v1, ...): oml_transforms.cpp.
void register_oml_transforms(Registries& registries);

}  // namespace oml::data::detail
