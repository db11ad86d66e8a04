// augs_albu (oml/data/albu_augs.h): each albumentations 1.3.1 operation OML's get_augs_albu uses,
// with albumentations' default arguments unless OML sets them, written with OpenCV on the uint8
// RGB image. Parameters are drawn as albumentations draws them (same distributions), from the
// item's KeyedRandom.
#include "oml/data/albu_augs.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <vector>

#include "oml/config/reader.h"
#include "transform_parts.h"

namespace oml::data {

namespace {

using detail::Normalisation;

const cv::Scalar kWhite(255, 255, 255);

// albumentations' OneOf: one of `names`, with probability proportional to `weights` (the
// children's own p), applied with certainty once chosen.
std::string one_of(KeyedRandom& rng, double p, const std::vector<std::string>& names,
                   const std::vector<double>& weights) {
  if (!rng.bernoulli(p)) return "";
  double total = 0;
  for (double w : weights) total += w;
  double u = rng.uniform(0.0, total);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (u < weights[i]) return names[i];
    u -= weights[i];
  }
  return names.back();
}

AlbuAugsPlan draw_plan(KeyedRandom& rng) {
  AlbuAugsPlan plan;
  plan.hflip = rng.bernoulli(0.5);
  plan.spatial = one_of(rng, 0.5, {"perspective", "affine", "grid_distortion"}, {1, 1, 1});
  plan.blur = one_of(rng, 0.5, {"motion_blur", "median_blur", "blur", "gaussian_blur"}, {1, 1, 1, 1});
  plan.colour = one_of(
      rng, 0.8,
      {"color_jitter", "hue_saturation_value", "clahe", "sharpen", "emboss", "random_brightness_contrast"},
      {0.5, 0.1, 0.1, 0.1, 0.1, 0.1});
  plan.channels = one_of(rng, 0.2, {"channel_dropout", "to_gray", "channel_shuffle"}, {0.1, 0.8, 0.1});
  plan.noise = one_of(rng, 0.25, {"coarse_dropout", "gauss_noise"}, {0.3, 0.7});
  return plan;
}

// ---- spatial (white borders, bilinear) ----------------------------------------------------------

// Perspective(scale=(0.06, 0.07)): each corner moves inwards by |N(0, sigma)| mod 0.32 of the side
// (sigma uniform in the range); the quadrilateral is mapped back onto the full image.
cv::Mat perspective(const cv::Mat& img, KeyedRandom& rng) {
  const double sigma = rng.uniform(0.06, 0.07);
  std::array<cv::Point2f, 4> quad;
  const float w = static_cast<float>(img.cols), h = static_cast<float>(img.rows);
  std::array<float, 8> d;
  for (float& v : d) v = static_cast<float>(std::fmod(std::abs(rng.normal(0.0, sigma)), 0.32));
  quad[0] = {d[0] * w, d[1] * h};
  quad[1] = {(1 - d[2]) * w, d[3] * h};
  quad[2] = {(1 - d[4]) * w, (1 - d[5]) * h};
  quad[3] = {d[6] * w, (1 - d[7]) * h};
  const std::array<cv::Point2f, 4> corners{cv::Point2f(0, 0), cv::Point2f(w, 0), cv::Point2f(w, h),
                                           cv::Point2f(0, h)};
  const cv::Mat m = cv::getPerspectiveTransform(quad.data(), corners.data());
  cv::Mat out;
  cv::warpPerspective(img, out, m, img.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT, kWhite);
  return out;
}

// Affine(scale=None, rotate=(-0.1, 0.1) degrees, translate_percent=(-0.05, 0.05), shear=(-7, 7)
// degrees on x and y), about the image centre.
cv::Mat affine(const cv::Mat& img, KeyedRandom& rng) {
  const double w = img.cols, h = img.rows;
  const double tx = rng.uniform(-0.05, 0.05) * w, ty = rng.uniform(-0.05, 0.05) * h;
  const double rotate = rng.uniform(-0.1, 0.1) * M_PI / 180.0;
  const double shear_x = rng.uniform(-7.0, 7.0) * M_PI / 180.0,
               shear_y = rng.uniform(-7.0, 7.0) * M_PI / 180.0;
  const cv::Matx33d to_origin(1, 0, -w / 2, 0, 1, -h / 2, 0, 0, 1);
  const cv::Matx33d back(1, 0, w / 2 + tx, 0, 1, h / 2 + ty, 0, 0, 1);
  const cv::Matx33d rotation(std::cos(rotate), -std::sin(rotate), 0, std::sin(rotate), std::cos(rotate), 0, 0,
                             0, 1);
  const cv::Matx33d shear(1, std::tan(shear_x), 0, std::tan(shear_y), 1, 0, 0, 0, 1);
  const cv::Matx33d m = back * rotation * shear * to_origin;
  const cv::Matx23d m2(m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2));
  cv::Mat out;
  cv::warpAffine(img, out, m2, img.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT, kWhite);
  return out;
}

// GridDistortion(num_steps=5, distort_limit=0.1): the image cut into 5 x 5 cells (plus the
// remainder), each column and row of cells stretched by a factor uniform in [0.9, 1.1].
cv::Mat grid_distortion(const cv::Mat& img, KeyedRandom& rng) {
  constexpr int kSteps = 5;
  std::array<double, kSteps + 1> x_steps, y_steps;
  for (double& s : x_steps) s = 1 + rng.uniform(-0.1, 0.1);
  for (double& s : y_steps) s = 1 + rng.uniform(-0.1, 0.1);
  // Source coordinate of each output coordinate along one axis: piecewise linear.
  const auto axis = [](int size, const std::array<double, kSteps + 1>& steps) {
    std::vector<float> coords(size);
    const int step = std::max(1, size / kSteps);
    double previous = 0;
    for (int start = 0, i = 0; start < size; start += step, ++i) {
      // As albumentations: the last, partial cell ends exactly at the border.
      const bool last = start + step > size;
      const int end = last ? size : start + step;
      const double current =
          last ? size : previous + step * steps[std::min<std::size_t>(i, steps.size() - 1)];
      const int n = end - start;
      for (int k = 0; k < n; ++k) {
        coords[start + k] =
            static_cast<float>(n == 1 ? previous : previous + (current - previous) * k / (n - 1));
      }
      previous = current;
    }
    return coords;
  };
  const auto xs = axis(img.cols, x_steps), ys = axis(img.rows, y_steps);
  cv::Mat map_x(img.size(), CV_32FC1), map_y(img.size(), CV_32FC1);
  for (int y = 0; y < img.rows; ++y) {
    for (int x = 0; x < img.cols; ++x) {
      map_x.at<float>(y, x) = xs[x];
      map_y.at<float>(y, x) = ys[y];
    }
  }
  cv::Mat out;
  cv::remap(img, out, map_x, map_y, cv::INTER_LINEAR, cv::BORDER_CONSTANT, kWhite);
  return out;
}

// ---- blur ---------------------------------------------------------------------------------------

int odd_kernel(KeyedRandom& rng) { return 3 + 2 * static_cast<int>(rng.integer(0, 3)); }  // 3, 5 or 7

// MotionBlur(blur_limit=7, allow_shifted=True): a one-pixel line between two random points of a
// k x k kernel (k odd in [3, 7]), normalised.
cv::Mat motion_blur(const cv::Mat& img, KeyedRandom& rng) {
  const int k = odd_kernel(rng);
  const int x1 = static_cast<int>(rng.integer(0, k)), x2 = static_cast<int>(rng.integer(0, k));
  int y1 = 0, y2 = 0;
  if (x1 == x2) {  // a vertical line needs two different rows
    y1 = static_cast<int>(rng.integer(0, k));
    y2 = static_cast<int>(rng.integer(0, k - 1));
    if (y2 >= y1) ++y2;
  } else {
    y1 = static_cast<int>(rng.integer(0, k));
    y2 = static_cast<int>(rng.integer(0, k));
  }
  cv::Mat kernel = cv::Mat::zeros(k, k, CV_32FC1);
  cv::line(kernel, {x1, y1}, {x2, y2}, cv::Scalar(1.0), 1);
  kernel /= cv::sum(kernel)[0];
  cv::Mat out;
  cv::filter2D(img, out, -1, kernel);
  return out;
}

cv::Mat blur(const std::string& kind, const cv::Mat& img, KeyedRandom& rng) {
  if (kind == "motion_blur") return motion_blur(img, rng);
  cv::Mat out;
  if (kind == "median_blur") {
    cv::medianBlur(img, out, odd_kernel(rng));
  } else if (kind == "blur") {
    const int k = odd_kernel(rng);
    cv::blur(img, out, {k, k});
  } else {  // GaussianBlur(blur_limit=(3, 7), sigma_limit=(0.7, 2.0))
    // albumentations draws 3..7 and moves even sizes up: 3 (1/5), 5 (2/5), 7 (2/5).
    int k = static_cast<int>(rng.integer(3, 8));
    if (k % 2 == 0) ++k;
    const double sigma = rng.uniform(0.7, 2.0);
    cv::GaussianBlur(img, out, {k, k}, sigma);
  }
  return out;
}

// ---- colour -------------------------------------------------------------------------------------

cv::Mat apply_lut(const cv::Mat& img, const std::function<double(int)>& f) {
  cv::Mat lut(1, 256, CV_8UC1);
  for (int v = 0; v < 256; ++v) lut.at<uint8_t>(v) = static_cast<uint8_t>(std::clamp(f(v), 0.0, 255.0));
  cv::Mat out;
  cv::LUT(img, lut, out);
  return out;
}

// Shifts (hue, in OpenCV's 0..179 units, wrapped as numpy's mod) or scales the channels of the
// HSV image with tables; values truncated to uint8 as albumentations' astype(uint8).
cv::Mat hsv_tables(const cv::Mat& img, const std::function<double(int)>& hue,
                   const std::function<double(int)>& sat, const std::function<double(int)>& val) {
  cv::Mat hsv;
  cv::cvtColor(img, hsv, cv::COLOR_RGB2HSV);
  std::vector<cv::Mat> ch;
  cv::split(hsv, ch);
  cv::Mat hue_lut(1, 256, CV_8UC1);
  for (int v = 0; v < 256; ++v) {
    double h = std::fmod(hue(v), 180.0);
    if (h < 0) h += 180.0;
    hue_lut.at<uint8_t>(v) = static_cast<uint8_t>(h);
  }
  cv::LUT(ch[0], hue_lut, ch[0]);
  ch[1] = apply_lut(ch[1], sat);
  ch[2] = apply_lut(ch[2], val);
  cv::merge(ch, hsv);
  cv::Mat out;
  cv::cvtColor(hsv, out, cv::COLOR_HSV2RGB);
  return out;
}

// ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1): factors uniform in
// [0.6, 1.4] (hue shift in [-0.1, 0.1] of a turn), applied in a random order, as torchvision's.
cv::Mat color_jitter(cv::Mat img, KeyedRandom& rng) {
  const double b = rng.uniform(0.6, 1.4), c = rng.uniform(0.6, 1.4), s = rng.uniform(0.6, 1.4);
  const double hue = rng.uniform(-0.1, 0.1);
  std::array<int, 4> order{0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.integer(0, i + 1)]);
  for (int op : order) {
    if (op == 0) {
      img = apply_lut(img, [&](int v) { return v * b; });
    } else if (op == 1) {
      cv::Mat gray;
      cv::cvtColor(img, gray, cv::COLOR_RGB2GRAY);
      const double mean = cv::mean(gray)[0];
      img = apply_lut(img, [&](int v) { return v * c + mean * (1 - c); });
    } else if (op == 2) {
      cv::Mat gray, gray3, out;
      cv::cvtColor(img, gray, cv::COLOR_RGB2GRAY);
      cv::cvtColor(gray, gray3, cv::COLOR_GRAY2RGB);
      cv::addWeighted(img, s, gray3, 1 - s, 0.0, out);
      img = out;
    } else {
      const double shift = hue * 180;
      img = hsv_tables(
          img, [&](int v) { return v + shift; }, [](int v) { return v; }, [](int v) { return v; });
    }
  }
  return img;
}

// 3 x 3 kernels mixing the identity with an effect, as Sharpen and Emboss build theirs.
cv::Mat mix_kernel(const cv::Mat& img, double alpha, const cv::Matx33f& effect) {
  const cv::Matx33f identity(0, 0, 0, 0, 1, 0, 0, 0, 0);
  const cv::Matx33f kernel = identity * static_cast<float>(1 - alpha) + effect * static_cast<float>(alpha);
  cv::Mat out;
  cv::filter2D(img, out, -1, cv::Mat(kernel));
  return out;
}

cv::Mat colour(const std::string& kind, const cv::Mat& img, KeyedRandom& rng) {
  if (kind == "color_jitter") return color_jitter(img, rng);
  if (kind == "hue_saturation_value") {  // shifts: hue +-20, saturation +-30, value +-20
    const double h = rng.uniform(-20, 20), s = rng.uniform(-30, 30), v = rng.uniform(-20, 20);
    return hsv_tables(
        img, [&](int x) { return x + h; }, [&](int x) { return x + s; }, [&](int x) { return x + v; });
  }
  if (kind == "clahe") {  // CLAHE(clip_limit=(1, 4), tile_grid_size=(8, 8)) on the L of Lab
    const double clip = rng.uniform(1.0, 4.0);
    cv::Mat lab, out;
    cv::cvtColor(img, lab, cv::COLOR_RGB2Lab);
    std::vector<cv::Mat> ch;
    cv::split(lab, ch);
    cv::createCLAHE(clip, {8, 8})->apply(ch[0], ch[0]);
    cv::merge(ch, lab);
    cv::cvtColor(lab, out, cv::COLOR_Lab2RGB);
    return out;
  }
  if (kind == "sharpen") {  // Sharpen(alpha=(0.2, 0.5), lightness=(0.5, 1.0))
    const double alpha = rng.uniform(0.2, 0.5);
    const auto l = static_cast<float>(rng.uniform(0.5, 1.0));
    return mix_kernel(img, alpha, cv::Matx33f(-1, -1, -1, -1, 8 + l, -1, -1, -1, -1));
  }
  if (kind == "emboss") {  // Emboss(alpha=(0.2, 0.5), strength=(0.2, 0.7))
    const double alpha = rng.uniform(0.2, 0.5);
    const auto s = static_cast<float>(rng.uniform(0.2, 0.7));
    return mix_kernel(img, alpha, cv::Matx33f(-1 - s, -s, 0, -s, 1, s, 0, s, 1 + s));
  }
  // RandomBrightnessContrast(0.2, 0.2, brightness_by_max=True): x * (1 + c) + 255 b.
  const double alpha = 1 + rng.uniform(-0.2, 0.2), beta = rng.uniform(-0.2, 0.2) * 255;
  return apply_lut(img, [&](int v) { return v * alpha + beta; });
}

// ---- channels, noise ----------------------------------------------------------------------------

cv::Mat channels(const std::string& kind, const cv::Mat& img, KeyedRandom& rng) {
  std::vector<cv::Mat> ch;
  cv::split(img, ch);
  if (kind == "channel_dropout") {  // one channel set to 0
    ch[rng.integer(0, 3)].setTo(0);
  } else if (kind == "to_gray") {
    cv::Mat gray;
    cv::cvtColor(img, gray, cv::COLOR_RGB2GRAY);
    ch = {gray, gray, gray};
  } else {  // channel_shuffle
    for (int i = 2; i > 0; --i) std::swap(ch[i], ch[rng.integer(0, i + 1)]);
  }
  cv::Mat out;
  cv::merge(ch, out);
  return out;
}

cv::Mat noise(const std::string& kind, const cv::Mat& img, KeyedRandom& rng) {
  cv::Mat out = img.clone();
  if (kind == "coarse_dropout") {  // CoarseDropout(max_holes=3, 20 x 20 px): 3 white holes
    const int hh = std::min(20, out.rows), hw = std::min(20, out.cols);
    for (int hole = 0; hole < 3; ++hole) {
      const auto y = static_cast<int>(rng.integer(0, out.rows - hh + 1));
      const auto x = static_cast<int>(rng.integer(0, out.cols - hw + 1));
      out(cv::Rect(x, y, hw, hh)).setTo(kWhite);
    }
    return out;
  }
  // GaussNoise(var_limit=(10, 50)): N(0, sqrt(var)) per pixel and channel, clipped, truncated.
  const double sigma = std::sqrt(rng.uniform(10.0, 50.0));
  for (int y = 0; y < out.rows; ++y) {
    auto* row = out.ptr<uint8_t>(y);
    for (int x = 0; x < out.cols * 3; ++x) {
      row[x] = static_cast<uint8_t>(std::clamp(row[x] + rng.normal(0.0, sigma), 0.0, 255.0));
    }
  }
  return out;
}

class AlbuAugsTransform : public Transform {
 public:
  AlbuAugsTransform(int im_size, Normalisation norm) : im_size_(im_size), norm_(std::move(norm)) {}

  at::Tensor apply(const at::Tensor& image, const RandomKey& key) const override {
    detail::check_input(image);
    KeyedRandom rng(key);
    const AlbuAugsPlan plan = draw_plan(rng);
    cv::Mat img = detail::longest_side_pad(detail::as_mat(image), im_size_);
    if (plan.hflip) {
      cv::Mat flipped;
      cv::flip(img, flipped, 1);
      img = flipped;
    }
    if (plan.spatial == "perspective") img = perspective(img, rng);
    if (plan.spatial == "affine") img = affine(img, rng);
    if (plan.spatial == "grid_distortion") img = grid_distortion(img, rng);
    if (!plan.blur.empty()) img = blur(plan.blur, img, rng);
    if (!plan.colour.empty()) img = colour(plan.colour, img, rng);
    if (!plan.channels.empty()) img = channels(plan.channels, img, rng);
    if (!plan.noise.empty()) img = noise(plan.noise, img, rng);
    return detail::normalise_u8(img, norm_, detail::NormStyle::albumentations);
  }

  std::string describe() const override {
    return "augs_albu(im_size=" + std::to_string(im_size_) + ", " + detail::describe_norm(norm_) + ")";
  }

 private:
  int im_size_;
  Normalisation norm_;
};

}  // namespace

AlbuAugsPlan albu_augs_plan(const RandomKey& key) {
  KeyedRandom rng(key);
  return draw_plan(rng);
}

namespace detail {

std::shared_ptr<Transform> make_augs_albu(const SizedNorm& args) {
  return std::make_shared<AlbuAugsTransform>(args.im_size, args.norm);
}

}  // namespace detail

}  // namespace oml::data
