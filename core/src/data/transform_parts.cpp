// Pieces shared by the built-in transforms (see transform_parts.h).
#include "transform_parts.h"

#include <torch/torch.h>

#include <sstream>

#include "oml/common/error.h"

namespace oml::data::detail {

void read_normalisation(config::MapReader& reader, Normalisation& norm) {
  reader.optional("mean", norm.mean).optional("std", norm.std);
}

void check_normalisation(const config::Node& args, const Normalisation& norm) {
  if (norm.mean.size() != 3)
    args["mean"].fail("expected 3 values (R, G, B), got " + std::to_string(norm.mean.size()));
  if (norm.std.size() != 3)
    args["std"].fail("expected 3 values (R, G, B), got " + std::to_string(norm.std.size()));
  for (double s : norm.std) {
    if (!(s > 0)) args["std"].fail("expected positive values, got " + std::to_string(s));
  }
}

SizedNorm parse_sized_norm(config::ArgsReader& reader, bool im_size_required) {
  SizedNorm a;
  im_size_required ? reader.required("im_size", a.im_size) : reader.optional("im_size", a.im_size);
  read_normalisation(reader, a.norm);
  reader.check([&] {
    check_normalisation(reader.node(), a.norm);
    check_positive(reader.node(), "im_size", a.im_size);
  });
  return a;
}

void check_positive(const config::Node& args, const std::string& key, int64_t value) {
  if (value < 1) args[key].fail("expected a positive image size, got " + std::to_string(value));
}

void check_range(const config::Node& args, const std::string& key, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    std::ostringstream msg;
    msg << "expected a value in [" << lo << ", " << hi << "], got " << value;
    args[key].fail(msg.str());
  }
}

std::string describe_norm(const Normalisation& n) {
  std::ostringstream out;
  out << "mean=[" << n.mean[0] << "," << n.mean[1] << "," << n.mean[2] << "], std=[" << n.std[0] << ","
      << n.std[1] << "," << n.std[2] << "]";
  return out.str();
}

cv::Mat as_mat(const at::Tensor& image) {
  TORCH_CHECK(
      image.dim() == 3 && image.size(2) == 3 && image.scalar_type() == torch::kUInt8 && image.is_contiguous(),
      "transforms expect a contiguous uint8 [H, W, 3] image");
  return cv::Mat(static_cast<int>(image.size(0)), static_cast<int>(image.size(1)), CV_8UC3, image.data_ptr());
}

void check_input(const at::Tensor& image) {
  OML_CHECK(image.defined() && image.dim() == 3 && image.size(2) == 3 &&
                image.scalar_type() == torch::kUInt8 && image.size(0) > 0 && image.size(1) > 0,
            UsageError, "a transform expects an RGB uint8 image [H, W, 3], got ",
            image.defined() ? image.sizes() : c10::IntArrayRef{});
}

at::Tensor normalise(const cv::Mat& rgb, const Normalisation& n) {
  auto out = torch::empty({3, rgb.rows, rgb.cols}, torch::kFloat32);
  float* base = out.data_ptr<float>();
  const std::size_t plane = static_cast<std::size_t>(rgb.rows) * rgb.cols;
  std::vector<cv::Mat> channels;
  cv::split(rgb, channels);
  for (int c = 0; c < 3; ++c) {
    cv::Mat dst(rgb.rows, rgb.cols, CV_32FC1, base + c * plane);
    channels[c].convertTo(dst, CV_32F, 1.0 / (255.0 * n.std[c]), -n.mean[c] / n.std[c]);
  }
  return out;
}

at::Tensor normalise_u8(const cv::Mat& rgb, const Normalisation& n, NormStyle style) {
  OML_ASSERT(rgb.type() == CV_8UC3, "normalise_u8 expects an RGB uint8 image");
  // One table per channel: the 256 values a pixel can take, each computed as the library does.
  std::array<std::array<float, 256>, 3> table;
  for (int c = 0; c < 3; ++c) {
    const auto mean = static_cast<float>(n.mean[c]);
    const auto std = static_cast<float>(n.std[c]);
    const float albu_mean = mean * 255.0f;
    const float albu_scale = 1.0f / (std * 255.0f);
    for (int v = 0; v < 256; ++v) {
      const auto x = static_cast<float>(v);
      table[c][v] =
          style == NormStyle::torchvision ? (x / 255.0f - mean) / std : (x - albu_mean) * albu_scale;
    }
  }
  auto out = torch::empty({3, rgb.rows, rgb.cols}, torch::kFloat32);
  float* planes[3];
  const std::size_t plane = static_cast<std::size_t>(rgb.rows) * rgb.cols;
  for (int c = 0; c < 3; ++c) planes[c] = out.data_ptr<float>() + c * plane;
  for (int y = 0; y < rgb.rows; ++y) {
    const uint8_t* row = rgb.ptr<uint8_t>(y);
    const std::size_t offset = static_cast<std::size_t>(y) * rgb.cols;
    for (int x = 0; x < rgb.cols; ++x) {
      for (int c = 0; c < 3; ++c) planes[c][offset + x] = table[c][row[3 * x + c]];
    }
  }
  return out;
}

std::pair<int, int> checked_resize(double width, double height, int src_width, int src_height,
                                   const std::string& transform) {
  OML_CHECK(width >= 1 && height >= 1 && width * height <= kMaxResizedPixels, DataError, transform,
            " would resize this ", src_width, "x", src_height, " image to ", static_cast<int64_t>(width), "x",
            static_cast<int64_t>(height), " pixels, more than the ", static_cast<int64_t>(kMaxResizedPixels),
            " a transform resizes to (an image this elongated is not one the model can use)");
  return {static_cast<int>(width), static_cast<int>(height)};
}

cv::Mat resize_pil(const cv::Mat& src, int width, int height, PilFilter filter) {
  OML_ASSERT(src.type() == CV_8UC3, "resize_pil expects an RGB uint8 image");
  cv::Mat dst(height, width, CV_8UC3);
  ImageView view;
  view.data = src.data;
  view.height = src.rows;
  view.width = src.cols;
  view.channels = 3;
  view.row_stride = static_cast<std::ptrdiff_t>(src.step);
  resize_like_pil(view, height, width, filter, dst.data);
  return dst;
}

}  // namespace oml::data::detail
