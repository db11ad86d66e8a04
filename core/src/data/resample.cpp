// Pillow's 8-bit resampling (see the header). Every step that decides a pixel value follows
// Pillow's arithmetic: coefficients in double, normalised, rounded half away from zero to
// 22-bit fixed point; sums start at half a unit and are clipped to [0, 255] after each pass.
#include "oml/data/resample.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "oml/common/error.h"

namespace oml::data {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution kernel with a = -0.5 (Pillow's and torchvision's bicubic).
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// For each output position along one axis: the first input index, how many inputs it reads and
// their fixed-point weights (`size` per output, zero-padded).
struct Coefficients {
  int size = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

Coefficients coefficients(int in_size, int out_size, PilFilter filter) {
  const double support_1 = filter == PilFilter::bilinear ? 1.0 : 2.0;
  double (*kernel)(double) = filter == PilFilter::bilinear ? triangle : cubic;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_1 * filter_scale;
  const double inverse = 1.0 / filter_scale;  // Pillow multiplies by it (not divides): same bits
  Coefficients c;
  c.size = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<std::size_t>(out_size) * c.size, 0);
  std::vector<double> w(c.size);
  for (int o = 0; o < out_size; ++o) {
    const double centre = (o + 0.5) * scale;
    // Truncation toward zero, then clamping, as Pillow's (int) casts do.
    const int lo = std::max(0, static_cast<int>(centre - support + 0.5));
    const int hi = std::min(in_size, static_cast<int>(centre + support + 0.5));
    const int n = hi - lo;
    double total = 0.0;
    for (int i = 0; i < n; ++i) {
      w[i] = kernel((i + lo - centre + 0.5) * inverse);
      total += w[i];
    }
    int32_t* fixed = &c.weights[static_cast<std::size_t>(o) * c.size];
    for (int i = 0; i < n; ++i) {
      const double v = total != 0.0 ? w[i] / total : w[i];
      fixed[i] =
          static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[o] = lo;
    c.count[o] = n;
  }
  return c;
}

inline uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// The row pass: `out` (rows x out_len pixels) from `in` (rows x in_len pixels); `step_in` is the byte
// distance between neighbours along the resized axis, `row_in` / `row_out` between lines.
void convolve(const uint8_t* in, std::ptrdiff_t row_in, std::ptrdiff_t step_in, int lines, uint8_t* out,
              std::ptrdiff_t row_out, std::ptrdiff_t step_out, int out_len, int channels,
              const Coefficients& c) {
  for (int line = 0; line < lines; ++line) {
    const uint8_t* src = in + line * row_in;
    uint8_t* dst = out + line * row_out;
    for (int o = 0; o < out_len; ++o) {
      const int32_t* k = &c.weights[static_cast<std::size_t>(o) * c.size];
      const uint8_t* p = src + c.first[o] * step_in;
      for (int ch = 0; ch < channels; ++ch) {
        int32_t sum = 1 << (kPrecisionBits - 1);
        for (int i = 0; i < c.count[o]; ++i) sum += static_cast<int32_t>(p[i * step_in + ch]) * k[i];
        dst[o * step_out + ch] = clip8(sum);
      }
    }
  }
}

// The column pass, output row by output row: each is a weighted sum of whole input rows
// (`row_bytes` bytes each, `row_in` apart), accumulated in 32 bits.
void convolve_rows(const uint8_t* in, std::ptrdiff_t row_in, std::ptrdiff_t row_bytes, uint8_t* out,
                   int out_rows, const Coefficients& c) {
  std::vector<int32_t> acc(row_bytes);
  for (int o = 0; o < out_rows; ++o) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    const int32_t* k = &c.weights[static_cast<std::size_t>(o) * c.size];
    for (int i = 0; i < c.count[o]; ++i) {
      const uint8_t* row = in + (c.first[o] + i) * row_in;
      const int32_t weight = k[i];
      for (std::ptrdiff_t x = 0; x < row_bytes; ++x) acc[x] += static_cast<int32_t>(row[x]) * weight;
    }
    uint8_t* dst = out + o * row_bytes;
    for (std::ptrdiff_t x = 0; x < row_bytes; ++x) dst[x] = clip8(acc[x]);
  }
}

}  // namespace

void resize_like_pil(const ImageView& src, int out_height, int out_width, PilFilter filter, uint8_t* out) {
  OML_CHECK(
      src.data && src.height > 0 && src.width > 0 && src.channels > 0 && out_height > 0 && out_width > 0,
      UsageError, "resize_like_pil: expected a non-empty image and output size, got ", src.height, "x",
      src.width, "x", src.channels, " -> ", out_height, "x", out_width);
  const int ch = src.channels;
  const std::ptrdiff_t out_row = static_cast<std::ptrdiff_t>(out_width) * ch;
  const bool horizontal = out_width != src.width;
  const bool vertical = out_height != src.height;
  if (!horizontal && !vertical) {
    for (int y = 0; y < src.height; ++y)
      std::memcpy(out + y * out_row, src.data + y * src.row_stride, out_row);
    return;
  }
  const Coefficients cv = coefficients(src.height, out_height, filter);
  if (!horizontal) {
    convolve_rows(src.data, src.row_stride, out_row, out, out_height, cv);
    return;
  }
  const Coefficients ch_coeffs = coefficients(src.width, out_width, filter);
  if (!vertical) {
    convolve(src.data, src.row_stride, ch, src.height, out, out_row, ch, out_width, ch, ch_coeffs);
    return;
  }
  // Rows first, only those the column pass reads (as Pillow), into an 8-bit intermediate image.
  const int first_row = cv.first.front();
  const int last_row = cv.first.back() + cv.count.back();
  std::vector<uint8_t> temp(static_cast<std::size_t>(last_row - first_row) * out_row);
  convolve(src.data + first_row * src.row_stride, src.row_stride, ch, last_row - first_row, temp.data(),
           out_row, ch, out_width, ch, ch_coeffs);
  Coefficients shifted = cv;
  for (int& f : shifted.first) f -= first_row;
  convolve_rows(temp.data(), out_row, out_row, out, out_height, shifted);
}

at::Tensor resize_like_pil(const at::Tensor& image, int64_t height, int64_t width, PilFilter filter) {
  OML_CHECK(image.defined() && image.dim() == 3 && image.scalar_type() == torch::kUInt8, UsageError,
            "resize_like_pil: expected a uint8 [H, W, C] image");
  const at::Tensor src = image.contiguous();
  auto out = torch::empty({height, width, src.size(2)}, torch::kUInt8);
  ImageView view;
  view.data = src.data_ptr<uint8_t>();
  view.height = static_cast<int>(src.size(0));
  view.width = static_cast<int>(src.size(1));
  view.channels = static_cast<int>(src.size(2));
  view.row_stride = static_cast<std::ptrdiff_t>(view.width) * view.channels;
  resize_like_pil(view, static_cast<int>(height), static_cast<int>(width), filter, out.data_ptr<uint8_t>());
  return out;
}

}  // namespace oml::data
