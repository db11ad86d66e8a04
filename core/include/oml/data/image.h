#pragma once
// Image decoding (OpenCV stays inside oml_core; callers see tensors).
//
// An image is a contiguous uint8 tensor [H, W, 3] in RGB order: grayscale, RGB and RGBA (alpha
// dropped) JPEG/PNG files all become 3 channels. EXIF orientation is ignored, as PIL does, so
// pixels match OML's Python loader.

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "oml/common/error.h"
#include "oml/data/dataframe.h"

namespace oml::data {

/// The extensions (lower case, with the dot) a folder of images is listed by: every format
/// decode_image reads (JPEG, PNG, BMP, WebP, TIFF, PNM/PAM, PFM). A file of another extension in
/// such a folder is not an image of it.
const std::vector<std::string>& image_file_extensions();

/// The bytes of image file `path`; DataError naming it when it is missing, not a regular file
/// (a FIFO would block the read forever), or larger than `max_bytes` (0: any size), which is
/// checked before anything is read.
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = 0);

/// What an encoded image's header says, read without decoding it.
struct ImageHeader {
  std::string format;            ///< "JPEG", "PNG", "BMP", "WebP", "TIFF", "PNM", "PFM"
  int64_t width = 0;             ///< > 0
  int64_t height = 0;            ///< > 0
  int64_t channels = 0;          ///< as the decoder produces them (<= 4)
  int64_t bytes_per_sample = 0;  ///< 1, 2 (16-bit PNG/TIFF/PNM) or 4 (float TIFF/PFM)

  /// width * height, saturating at INT64_MAX.
  int64_t pixels() const;
  /// An upper bound of the memory decode_image() holds while it decodes this image: the decoded
  /// samples, an 8-bit copy of deep images, and the RGB result (saturating).
  int64_t decode_bytes() const;
};

/// The header of `bytes`, which must be one of the formats decode_image() accepts. DataError
/// naming `path` when the format is another one (or unknown), or its header is truncated or
/// gives a zero size.
ImageHeader read_image_header(const std::string& bytes, const std::string& path);

/// Thrown by decode_image() for an image over its pixel limit or its memory budget (the server
/// answers 413 for it; commands exit 2 like any DataError).
class ImageTooLarge : public DataError {
 public:
  using DataError::DataError;
};

/// Memory shared by concurrent decodes: decode_image() holds `decode_bytes()` of it while it
/// decodes, so that N threads decoding at once never hold more than the budget. A decode that
/// does not fit waits until others finish; one larger than the whole budget is ImageTooLarge.
class DecodeBudget {
 public:
  explicit DecodeBudget(int64_t bytes);
  DecodeBudget(const DecodeBudget&) = delete;
  DecodeBudget& operator=(const DecodeBudget&) = delete;

  /// A share of the budget, returned when destroyed.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) { other.budget_ = nullptr; }
    Hold& operator=(Hold&& other) noexcept;
    ~Hold();

   private:
    friend class DecodeBudget;
    Hold(DecodeBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    DecodeBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  /// Waits until `bytes` are free and holds them. ImageTooLarge naming `path` and the budget's
  /// `setting` when `bytes` exceeds the whole budget.
  Hold reserve(int64_t bytes, const std::string& path, const std::string& setting);
  int64_t capacity() const { return capacity_; }
  int64_t in_use() const;

 private:
  void release(int64_t bytes);

  int64_t capacity_;
  int64_t used_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
};

/// The bounds decode_image() applies before it decodes anything.
struct ImageLimits {
  /// PIL's Image.MAX_IMAGE_PIXELS (about 89 Mpx: a 24-bit image of 256 MiB).
  static constexpr int64_t kDefaultMaxPixels = 89'478'485;
  int64_t max_pixels = kDefaultMaxPixels;  ///< width * height at most; 0: no limit
  DecodeBudget* budget = nullptr;          ///< shared memory budget; null: none
  /// Where the limit is set, for messages ("max_image_pixels", "--max-image-pixels").
  std::string setting = "max_image_pixels";
  std::string budget_setting = "the decode memory budget";
};

/// The largest file an image within `limits` can be read from (read_file_bytes's max_bytes):
/// 16 bytes a pixel plus 64 MiB; 0 (any size) without a pixel limit.
uint64_t max_image_file_bytes(const ImageLimits& limits);

/// ImageTooLarge naming `path`, both sizes and `limits.setting` when `header` has more pixels
/// than `limits.max_pixels` allows.
void check_pixel_limit(const ImageHeader& header, const ImageLimits& limits, const std::string& path);

/// Decodes encoded JPEG, PNG, BMP, WebP, TIFF or PNM/PFM bytes into an RGB uint8 [H, W, 3]
/// tensor. The header is read first (read_image_header): an image over `limits.max_pixels` is
/// ImageTooLarge before a byte is decoded, and the decode holds its share of `limits.budget`.
/// Another format, a corrupt file, a JPEG cut short (which libjpeg would otherwise decode with
/// grey rows), or a decoded size that is not the header's is a DataError naming `path`.
at::Tensor decode_image(const std::string& bytes, const std::string& path, const ImageLimits& limits = {});

/// Crops `image` [H, W, 3] to `box` (x_2/y_2 exclusive). A box outside the image is a DataError
/// naming `path` and the image size.
at::Tensor crop_image(const at::Tensor& image, const BBox& box, const std::string& path);

/// Encodes an RGB uint8 [H, W, 3] (RGBA [H, W, 4], grayscale [H, W]) tensor as PNG or JPEG by the
/// extension of `path_for_format` (used by converters, tests and benchmarks).
std::string encode_image(const at::Tensor& image, const std::string& path_for_format, int jpeg_quality = 95);

}  // namespace oml::data
