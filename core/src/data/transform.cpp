// The built-in transforms. Geometry runs on uint8 OpenCV images (cheap), then one pass writes
// the normalised float planes straight into the output tensor.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "oml/common/error.h"
#include "oml/common/random.h"
#include "oml/config/reader.h"
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "transform_parts.h"

namespace oml::data {

// ---- KeyedRandom ------------------------------------------------------------------------------

KeyedRandom::KeyedRandom(const RandomKey& key)
    : bits_(derive_seed(key.seed, {static_cast<uint64_t>(key.epoch), static_cast<uint64_t>(key.index)})) {}

uint64_t KeyedRandom::next_u64() { return bits_.next(); }

double KeyedRandom::uniform(double lo, double hi) { return lo + (hi - lo) * unit_interval(next_u64()); }

int64_t KeyedRandom::integer(int64_t lo, int64_t hi) {
  const auto value = lo + static_cast<int64_t>(uniform(0.0, 1.0) * static_cast<double>(hi - lo));
  return std::min(value, hi - 1);
}

double KeyedRandom::normal(double mean, double sigma) {
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  return mean + sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {

using namespace detail;

cv::Mat resize_to(const cv::Mat& src, int width, int height) {
  if (src.cols == width && src.rows == height) return src;
  cv::Mat dst;
  const bool shrinking = width < src.cols && height < src.rows;
  cv::resize(src, dst, cv::Size(width, height), 0, 0, shrinking ? cv::INTER_AREA : cv::INTER_LINEAR);
  return dst;
}

// ---- norm -------------------------------------------------------------------------------------

class NormTransform : public Transform {
 public:
  explicit NormTransform(Normalisation n) : n_(std::move(n)) {}
  at::Tensor apply(const at::Tensor& image, const RandomKey&) const override {
    check_input(image);
    return normalise(as_mat(image), n_);
  }
  std::string describe() const override { return "norm(" + describe_norm(n_) + ")"; }

 private:
  Normalisation n_;
};

// ---- resize -----------------------------------------------------------------------------------

class ResizeTransform : public Transform {
 public:
  ResizeTransform(int im_size, Normalisation n) : im_size_(im_size), n_(std::move(n)) {}
  at::Tensor apply(const at::Tensor& image, const RandomKey&) const override {
    check_input(image);
    return normalise(resize_to(as_mat(image), im_size_, im_size_), n_);
  }
  std::string describe() const override {
    return "resize(im_size=" + std::to_string(im_size_) + ", " + describe_norm(n_) + ")";
  }

 private:
  int im_size_;
  Normalisation n_;
};

// ---- norm_resize ------------------------------------------------------------------------------

// Longest side to im_size (aspect kept), then centred on a white im_size x im_size square.
class NormResizeTransform : public Transform {
 public:
  NormResizeTransform(int im_size, Normalisation n) : im_size_(im_size), n_(std::move(n)) {}
  at::Tensor apply(const at::Tensor& image, const RandomKey&) const override {
    check_input(image);
    const cv::Mat src = as_mat(image);
    const double scale = static_cast<double>(im_size_) / std::max(src.rows, src.cols);
    const int width = std::clamp(static_cast<int>(std::lround(src.cols * scale)), 1, im_size_);
    const int height = std::clamp(static_cast<int>(std::lround(src.rows * scale)), 1, im_size_);
    const cv::Mat resized = resize_to(src, width, height);
    cv::Mat square;
    const int top = (im_size_ - height) / 2, left = (im_size_ - width) / 2;
    cv::copyMakeBorder(resized, square, top, im_size_ - height - top, left, im_size_ - width - left,
                       cv::BORDER_CONSTANT, cv::Scalar(255, 255, 255));
    return normalise(square, n_);
  }
  std::string describe() const override {
    return "norm_resize(im_size=" + std::to_string(im_size_) + ", " + describe_norm(n_) + ")";
  }

 private:
  int im_size_;
  Normalisation n_;
};

// ---- norm_resize_center_crop ------------------------------------------------------------------

class ResizeCenterCropTransform : public Transform {
 public:
  ResizeCenterCropTransform(int im_size, int crop_size, Normalisation n)
      : im_size_(im_size), crop_size_(crop_size), n_(std::move(n)) {}
  at::Tensor apply(const at::Tensor& image, const RandomKey&) const override {
    check_input(image);
    const cv::Mat src = as_mat(image);
    const double scale = static_cast<double>(im_size_) / std::min(src.rows, src.cols);
    const auto [width, height] = checked_resize(std::max<double>(im_size_, std::round(src.cols * scale)),
                                                std::max<double>(im_size_, std::round(src.rows * scale)),
                                                src.cols, src.rows, "norm_resize_center_crop");
    const cv::Mat resized = resize_to(src, width, height);
    const cv::Rect centre((width - crop_size_) / 2, (height - crop_size_) / 2, crop_size_, crop_size_);
    return normalise(resized(centre), n_);
  }
  std::string describe() const override {
    return "norm_resize_center_crop(im_size=" + std::to_string(im_size_) +
           ", crop_size=" + std::to_string(crop_size_) + ", " + describe_norm(n_) + ")";
  }

 private:
  int im_size_;
  int crop_size_;
  Normalisation n_;
};

// ---- augs -------------------------------------------------------------------------------------

struct AugsOptions {
  int im_size = 224;
  double min_scale = 0.2;  ///< smallest crop area as a fraction of the image
  double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
  double hflip_p = 0.5;
  double brightness = 0.25, contrast = 0.25, saturation = 0.25;  ///< factors drawn in [1-x, 1+x]
  Normalisation norm;
};

// Random resized crop (torchvision's algorithm: 10 tries at a random area and aspect ratio, then
// a centre crop), horizontal flip, and colour jitter, all drawn from the item's RandomKey.
class AugsTransform : public Transform {
 public:
  explicit AugsTransform(AugsOptions o) : o_(std::move(o)) {}

  at::Tensor apply(const at::Tensor& image, const RandomKey& key) const override {
    check_input(image);
    KeyedRandom rng(key);
    const cv::Mat src = as_mat(image);
    cv::Mat crop = resize_to(src(random_crop(src.cols, src.rows, rng)), o_.im_size, o_.im_size);
    if (rng.bernoulli(o_.hflip_p)) {
      cv::Mat flipped;
      cv::flip(crop, flipped, 1);
      crop = flipped;
    }
    cv::Mat pixels;
    crop.convertTo(pixels, CV_32FC3);
    jitter(pixels, rng);
    return normalise(pixels, o_.norm);
  }

  std::string describe() const override {
    std::ostringstream out;
    out << "augs(im_size=" << o_.im_size << ", min_scale=" << o_.min_scale << ", hflip_p=" << o_.hflip_p
        << ", brightness=" << o_.brightness << ", contrast=" << o_.contrast
        << ", saturation=" << o_.saturation << ", " << describe_norm(o_.norm) << ")";
    return out.str();
  }

 private:
  cv::Rect random_crop(int width, int height, KeyedRandom& rng) const {
    const double area = static_cast<double>(width) * height;
    const double log_lo = std::log(o_.min_ratio), log_hi = std::log(o_.max_ratio);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * rng.uniform(o_.min_scale, 1.0);
      const double ratio = std::exp(rng.uniform(log_lo, log_hi));
      const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
      const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
      if (w > 0 && h > 0 && w <= width && h <= height) {
        const int x = static_cast<int>(rng.uniform(0, width - w + 1));
        const int y = static_cast<int>(rng.uniform(0, height - h + 1));
        return {std::min(x, width - w), std::min(y, height - h), w, h};
      }
    }
    // Fallback: the largest centred crop whose ratio lies within the range.
    int w = width, h = height;
    const double in_ratio = static_cast<double>(width) / height;
    if (in_ratio < o_.min_ratio) {
      h = std::max(1, static_cast<int>(std::lround(w / o_.min_ratio)));
    } else if (in_ratio > o_.max_ratio) {
      w = std::max(1, static_cast<int>(std::lround(h * o_.max_ratio)));
    }
    return {(width - w) / 2, (height - h) / 2, w, h};
  }

  // Brightness, contrast and saturation factors in [1 - x, 1 + x], applied in that order on
  // float pixels in [0, 255], clamped after each step (as torchvision does).
  void jitter(cv::Mat& pixels, KeyedRandom& rng) const {
    const double b = rng.uniform(1 - o_.brightness, 1 + o_.brightness);
    const double c = rng.uniform(1 - o_.contrast, 1 + o_.contrast);
    const double s = rng.uniform(1 - o_.saturation, 1 + o_.saturation);
    auto clamp = [&] {
      const cv::Mat floor = cv::max(pixels, 0.0);
      pixels = cv::min(floor, 255.0);
    };
    if (o_.brightness > 0) {
      pixels *= b;
      clamp();
    }
    if (o_.contrast > 0) {
      cv::Mat gray;
      cv::cvtColor(pixels, gray, cv::COLOR_RGB2GRAY);
      const double mean = cv::mean(gray)[0];
      pixels = pixels * c + cv::Scalar::all(mean * (1 - c));
      clamp();
    }
    if (o_.saturation > 0) {
      cv::Mat gray, gray3;
      cv::cvtColor(pixels, gray, cv::COLOR_RGB2GRAY);
      cv::cvtColor(gray, gray3, cv::COLOR_GRAY2RGB);
      cv::addWeighted(pixels, s, gray3, 1 - s, 0.0, pixels);
      clamp();
    }
  }

  AugsOptions o_;
};

// ---- parse ----------------------------------------------------------------------------------

struct CropArgs {
  int im_size = 256, crop_size = 224;
  Normalisation norm;
};

Normalisation parse_norm(config::ArgsReader& r) {
  Normalisation n;
  read_normalisation(r, n);
  r.check([&] { check_normalisation(r.node(), n); });
  return n;
}

SizedNorm parse_sized(config::ArgsReader& r) { return parse_sized_norm(r, /*im_size_required=*/false); }

CropArgs parse_center_crop(config::ArgsReader& r) {
  CropArgs a;
  r.optional("im_size", a.im_size).optional("crop_size", a.crop_size);
  read_normalisation(r, a.norm);
  r.check([&] {
    check_normalisation(r.node(), a.norm);
    check_positive(r.node(), "im_size", a.im_size);
    check_positive(r.node(), "crop_size", a.crop_size);
    if (a.crop_size > a.im_size) {
      r.node()["crop_size"].fail("expected crop_size <= im_size (" + std::to_string(a.im_size) + "), got " +
                                 std::to_string(a.crop_size));
    }
  });
  return a;
}

AugsOptions parse_augs(config::ArgsReader& r) {
  AugsOptions o;
  r.optional("im_size", o.im_size)
      .optional("min_scale", o.min_scale)
      .optional("min_ratio", o.min_ratio)
      .optional("max_ratio", o.max_ratio)
      .optional("hflip_p", o.hflip_p)
      .optional("brightness", o.brightness)
      .optional("contrast", o.contrast)
      .optional("saturation", o.saturation);
  read_normalisation(r, o.norm);
  r.check([&] {
    const config::Node& args = r.node();
    check_normalisation(args, o.norm);
    check_positive(args, "im_size", o.im_size);
    if (!(o.min_scale > 0 && o.min_scale <= 1)) {
      args["min_scale"].fail("expected a fraction in (0, 1], got " + std::to_string(o.min_scale));
    }
    if (!(o.min_ratio > 0 && o.min_ratio <= o.max_ratio)) {
      args["min_ratio"].fail("expected 0 < min_ratio <= max_ratio, got " + std::to_string(o.min_ratio) +
                             " and " + std::to_string(o.max_ratio));
    }
    check_range(args, "hflip_p", o.hflip_p, 0, 1);
    check_range(args, "brightness", o.brightness, 0, 1);
    check_range(args, "contrast", o.contrast, 0, 1);
    check_range(args, "saturation", o.saturation, 0, 1);
  });
  return o;
}

using TransformPtr = std::shared_ptr<Transform>;

}  // namespace

void register_builtin_transforms(Registries& registries) {
  detail::register_oml_transforms(registries);
  auto& t = registries.transforms;
  t.add(
      "norm", parse_norm,
      [](const Normalisation& n, const NoContext&) -> TransformPtr {
        return std::make_shared<NormTransform>(n);
      },
      "normalise with mean/std (ImageNet by default); keeps the image size");
  t.add(
      "resize", parse_sized,
      [](const SizedNorm& a, const NoContext&) -> TransformPtr {
        return std::make_shared<ResizeTransform>(a.im_size, a.norm);
      },
      "resize to im_size x im_size (aspect not kept), normalise");
  t.add(
      "norm_resize", parse_sized,
      [](const SizedNorm& a, const NoContext&) -> TransformPtr {
        return std::make_shared<NormResizeTransform>(a.im_size, a.norm);
      },
      "longest side to im_size, pad to a white square, normalise");
  t.add(
      "norm_resize_center_crop", parse_center_crop,
      [](const CropArgs& a, const NoContext&) -> TransformPtr {
        return std::make_shared<ResizeCenterCropTransform>(a.im_size, a.crop_size, a.norm);
      },
      "shorter side to im_size, centre crop crop_size, normalise");
  t.add(
      "augs", parse_augs,
      [](const AugsOptions& o, const NoContext&) -> TransformPtr {
        return std::make_shared<AugsTransform>(o);
      },
      "training augmentations: random resized crop, horizontal flip, colour jitter, normalise");
}

}  // namespace oml::data
