#include "oml/data/image.h"

#include <torch/torch.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "../common/raw_io.h"
#include "header_words.h"
#include "jpeg_decode.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"

namespace oml::data {

namespace {

bool is_jpeg(const std::string& bytes) {
  return bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
         static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF;
}

// libjpeg decodes a JPEG cut short by filling the missing rows with grey and only printing
// "Premature end of JPEG file". The last scan (after the last SOS marker, FF DA) of a complete
// file is followed by the end-of-image marker FF D9; entropy-coded data never holds FF D9
// (FF bytes in it are stuffed as FF 00), so its absence means the file was truncated.
bool jpeg_is_complete(const std::string& bytes) {
  const std::size_t last_sos = bytes.rfind("\xFF\xDA");
  if (last_sos == std::string::npos) return false;
  return bytes.find("\xFF\xD9", last_sos + 2) != std::string::npos;
}

bool is_png(const std::string& bytes) { return bytes.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0; }

using ::oml::detail::big_endian_u32;

bool is_pfm(const std::string& bytes) {
  return bytes.size() >= 2 && bytes[0] == 'P' && (bytes[1] == 'F' || bytes[1] == 'f');
}

// PFM, decoded here rather than by OpenCV: OpenCV 4.6 decodes PFM only from a file, so imdecode
// writes the bytes to a temporary file first (/tmp/__opencv_temp.*), and when its own header
// parser disagrees with the size (validateInputImageSize throws) it leaves that file behind: one
// file per such image, for oml-serve one per request. The result is what OpenCV's decoder gives
// (float BGR or grey, rows stored bottom to top, divided by |scale| when that is not 1), so the
// rest of decode_image treats both alike. Layout: "PF" (colour) or "Pf" (grey), whitespace, width,
// height and scale as whitespace-separated words, one whitespace byte, then width x height x
// channels 32-bit floats, little-endian when the scale is negative.
cv::Mat decode_pfm(const std::string& bytes, const ImageHeader& header, const std::string& path) {
  detail::HeaderWords words(bytes, 2);
  words.next();  // width and height: read_image_header has checked them
  words.next();
  const std::string scale_word = words.next();
  std::size_t at = words.position();
  double scale = 0;
  std::size_t parsed = 0;
  try {
    scale = std::stod(scale_word, &parsed);
  } catch (const std::exception&) {
    parsed = 0;
  }
  OML_CHECK(parsed == scale_word.size() && parsed > 0 && std::isfinite(scale) && scale != 0, DataError,
            "image ", path, " is a damaged PFM: its scale '", valid_utf8(scale_word.substr(0, 24)),
            "' is not a non-zero number");
  OML_CHECK(at < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[at])), DataError, "image ",
            path, " is a damaged PFM: no whitespace byte between its scale and its samples");
  ++at;  // the one whitespace byte before the samples
  // pixels() saturates, and a size that passes is at most the file's size, so nothing overflows.
  const auto available = static_cast<int64_t>(bytes.size() - at);
  OML_CHECK(header.pixels() <= available / (4 * header.channels), DataError, "image ", path,
            " is a truncated PFM: its ", header.width, "x", header.height, " samples need ",
            header.channels * 4, " bytes a pixel after the header, it has ", available, " bytes");
  const bool little = scale < 0;
  const int type = header.channels == 3 ? CV_32FC3 : CV_32FC1;
  cv::Mat out(static_cast<int>(header.height), static_cast<int>(header.width), type);
  const auto row_floats = static_cast<std::size_t>(header.width * header.channels);
  const float factor = std::fabs(scale) == 1.0 ? 1.0f : static_cast<float>(1.0 / std::fabs(scale));
  for (int64_t stored = 0; stored < header.height; ++stored) {
    auto* row = out.ptr<float>(static_cast<int>(header.height - 1 - stored));
    const auto* source = reinterpret_cast<const unsigned char*>(bytes.data()) + at + stored * row_floats * 4;
    for (std::size_t i = 0; i < row_floats; ++i) {
      const unsigned char* b = source + 4 * i;
      const uint32_t bits =
          little ? (uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24)
                 : (uint32_t{b[3]} | uint32_t{b[2]} << 8 | uint32_t{b[1]} << 16 | uint32_t{b[0]} << 24);
      float value;
      std::memcpy(&value, &bits, 4);
      row[i] = value * factor;
    }
  }
  if (header.channels == 3) cv::cvtColor(out, out, cv::COLOR_RGB2BGR);
  return out;
}

// What is wrong with a PNG's chunk structure ("" when nothing): libpng reports a truncated file or a
// chunk whose CRC-32 does not match by printing "libpng error: ..." on stderr before OpenCV gives
// up, ahead of our message; checking first keeps the user's screen to our one line. Each chunk is
// length (4 bytes, big endian) | type (4) | data | CRC-32 of type and data (4); IEND ends the file.
std::string png_damage(const std::string& bytes) {
  std::size_t at = 8;
  while (true) {
    if (at + 8 > bytes.size()) return "it ends inside a chunk header at byte " + std::to_string(at);
    const uint32_t length = big_endian_u32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (length > bytes.size() || at + 12 + length > bytes.size()) {
      return "chunk '" + type + "' at byte " + std::to_string(at) + " runs past the end of the file";
    }
    const auto* start = reinterpret_cast<const Bytef*>(bytes.data() + at + 4);
    if (crc32(0L, start, length + 4) != big_endian_u32(bytes, at + 8 + length)) {
      return "chunk '" + type + "' at byte " + std::to_string(at) + " fails its CRC check";
    }
    if (type == "IEND") return "";
    at += 12 + length;
  }
}

}  // namespace

std::string read_file_bytes(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  OML_CHECK(!std::filesystem::exists(status) || std::filesystem::is_regular_file(status), DataError, "image ",
            path, " is not a regular file (a folder, device or pipe)");
  const uint64_t size = std::filesystem::file_size(path, ec);
  OML_CHECK(ec || max_bytes == 0 || size <= max_bytes, DataError, "image ", path, " is ", size,
            " bytes, more than any image within the pixel limit takes (", max_bytes, "); it is not read");
  std::optional<std::string> bytes = oml::detail::read_file(path);
  OML_CHECK(bytes.has_value(), DataError, "cannot read image ", path, " (missing or not readable)");
  return std::move(*bytes);
}

const std::vector<std::string>& image_file_extensions() {
  static const std::vector<std::string> extensions{".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff",
                                                   ".pbm", ".pgm",  ".ppm", ".pnm", ".pam",  ".pfm"};
  return extensions;
}

uint64_t max_image_file_bytes(const ImageLimits& limits) {
  // 16 bytes a pixel (float32 RGBA, the widest sample a decoder here reads) and 64 MiB of
  // metadata: no file of an image within the limit is larger.
  if (limits.max_pixels <= 0) return 0;
  return static_cast<uint64_t>(limits.max_pixels) * 16 + (uint64_t{64} << 20);
}

// ---- DecodeBudget ------------------------------------------------------------------------------

DecodeBudget::DecodeBudget(int64_t bytes) : capacity_(bytes) {
  OML_CHECK(bytes > 0, UsageError, "a decode memory budget must be positive, got ", bytes, " bytes");
}

DecodeBudget::Hold& DecodeBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (budget_ != nullptr) budget_->release(bytes_);
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
  }
  return *this;
}

DecodeBudget::Hold::~Hold() {
  if (budget_ != nullptr) budget_->release(bytes_);
}

DecodeBudget::Hold DecodeBudget::reserve(int64_t bytes, const std::string& path, const std::string& setting) {
  if (bytes > capacity_) {
    throw ImageTooLarge(::oml::detail::concat("image ", path, " needs about ", bytes / (1024 * 1024),
                                              " MiB to decode, more than the whole ", setting, " of ",
                                              capacity_ / (1024 * 1024), " MiB"));
  }
  std::unique_lock<std::mutex> lock(mutex_);
  freed_.wait(lock, [&] { return used_ + bytes <= capacity_; });
  used_ += bytes;
  return Hold(this, bytes);
}

int64_t DecodeBudget::in_use() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

void DecodeBudget::release(int64_t bytes) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    used_ -= bytes;
  }
  freed_.notify_all();
}

// ---- decoding ----------------------------------------------------------------------------------

void check_pixel_limit(const ImageHeader& header, const ImageLimits& limits, const std::string& path) {
  if (limits.max_pixels > 0 && header.pixels() > limits.max_pixels) {
    throw ImageTooLarge(::oml::detail::concat("image ", path, " is ", header.width, "x", header.height, " = ",
                                              header.pixels(), " pixels, over the limit of ",
                                              limits.max_pixels, " pixels (", limits.setting, ")"));
  }
}

at::Tensor decode_image(const std::string& bytes, const std::string& path, const ImageLimits& limits) {
  OML_CHECK(!bytes.empty(), DataError, "image ", path, " is an empty file");
  const ImageHeader header = read_image_header(bytes, path);
  check_pixel_limit(header, limits, path);
  // Held until the RGB tensor is made; the caller's transform works on a copy it sizes itself.
  const DecodeBudget::Hold hold =
      limits.budget != nullptr ? limits.budget->reserve(header.decode_bytes(), path, limits.budget_setting)
                               : DecodeBudget::Hold{};
  if (is_jpeg(bytes)) {
    OML_CHECK(jpeg_is_complete(bytes), DataError, "image ", path,
              " is a truncated or corrupt JPEG (no end-of-image marker after the last scan)");
  }
  if (is_png(bytes)) {
    const std::string damage = png_damage(bytes);
    OML_CHECK(damage.empty(), DataError, "image ", path, " is a truncated or corrupt PNG: ", damage);
  }
  cv::Mat decoded;
  if (is_pfm(bytes)) {
    decoded = decode_pfm(bytes, header, path);
  } else if (is_jpeg(bytes)) {
    decoded = detail::decode_jpeg(bytes, path);
  } else {
    const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    try {
      decoded = cv::imdecode(raw, cv::IMREAD_UNCHANGED | cv::IMREAD_IGNORE_ORIENTATION);
    } catch (const cv::Exception& e) {
      throw DataError("image " + path + " cannot be decoded: " + trim(e.msg));
    }
  }
  OML_CHECK(!decoded.empty(), DataError, "image ", path, " cannot be decoded (a corrupt or truncated ",
            header.format, " file)");
  OML_CHECK(decoded.cols == header.width && decoded.rows == header.height, DataError, "image ", path,
            " decodes to ", decoded.cols, "x", decoded.rows, " but its ", header.format, " header says ",
            header.width, "x", header.height);
  if (decoded.depth() != CV_8U) {  // 16-bit PNGs: keep the high byte, as PIL's RGB conversion does
    cv::Mat eight;
    decoded.convertTo(eight, CV_8U, decoded.depth() == CV_16U ? 1.0 / 256.0 : 255.0);
    decoded = eight;
  }
  auto out = torch::empty({decoded.rows, decoded.cols, 3}, torch::kUInt8);
  cv::Mat rgb(decoded.rows, decoded.cols, CV_8UC3, out.data_ptr<uint8_t>());
  switch (decoded.channels()) {
    case 1:
      cv::cvtColor(decoded, rgb, cv::COLOR_GRAY2RGB);
      break;
    case 3:
      cv::cvtColor(decoded, rgb, cv::COLOR_BGR2RGB);
      break;
    case 4:
      cv::cvtColor(decoded, rgb, cv::COLOR_BGRA2RGB);
      break;
    default:
      throw DataError("image " + path + " has " + std::to_string(decoded.channels()) +
                      " channels; expected 1 (grayscale), 3 (RGB) or 4 (RGBA)");
  }
  OML_ASSERT(rgb.data == out.data_ptr<uint8_t>(), "cvtColor must write into the tensor");
  return out;
}

at::Tensor crop_image(const at::Tensor& image, const BBox& box, const std::string& path) {
  const int64_t height = image.size(0), width = image.size(1);
  OML_CHECK(box.x2 <= width && box.y2 <= height, DataError, "image ", path, " is ", width, "x", height,
            " (width x height) but its bounding box x_1=", box.x1, ", x_2=", box.x2, ", y_1=", box.y1,
            ", y_2=", box.y2, " reaches outside it; expected x_2 <= ", width, " and y_2 <= ", height);
  return image.slice(0, box.y1, box.y2).slice(1, box.x1, box.x2).contiguous();
}

std::string encode_image(const at::Tensor& image, const std::string& path_for_format, int jpeg_quality) {
  const auto contiguous = image.to(torch::kUInt8).contiguous();
  cv::Mat mat;
  if (contiguous.dim() == 2) {
    mat = cv::Mat(static_cast<int>(contiguous.size(0)), static_cast<int>(contiguous.size(1)), CV_8UC1,
                  contiguous.data_ptr<uint8_t>());
  } else {
    OML_CHECK(contiguous.dim() == 3 && (contiguous.size(2) == 3 || contiguous.size(2) == 4), UsageError,
              "encode_image expects [H, W, 3], [H, W, 4] or [H, W] uint8, got ", contiguous.sizes());
    const bool alpha = contiguous.size(2) == 4;
    const cv::Mat rgb(static_cast<int>(contiguous.size(0)), static_cast<int>(contiguous.size(1)),
                      alpha ? CV_8UC4 : CV_8UC3, contiguous.data_ptr<uint8_t>());
    cv::cvtColor(rgb, mat, alpha ? cv::COLOR_RGBA2BGRA : cv::COLOR_RGB2BGR);
  }
  std::string ext = std::filesystem::path(path_for_format).extension().string();
  std::vector<int> params;
  if (ext == ".jpg" || ext == ".jpeg") params = {cv::IMWRITE_JPEG_QUALITY, jpeg_quality};
  if (ext == ".png") params = {cv::IMWRITE_PNG_COMPRESSION, 1};
  std::vector<uchar> buffer;
  try {
    OML_CHECK(cv::imencode(ext, mat, buffer, params), RuntimeError, "cannot encode ", path_for_format);
  } catch (const cv::Exception& e) {
    throw RuntimeError("cannot encode " + path_for_format + ": " + trim(e.msg));
  }
  return std::string(buffer.begin(), buffer.end());
}

}  // namespace oml::data
