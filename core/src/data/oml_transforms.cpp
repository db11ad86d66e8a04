// OML's transform names (oml/registry/transforms.py in OpenMetricLearning) with OML's arguments,
// geometry and normalisation, and OML's per-weights transforms (TRANSFORMS_FOR_PRETRAINED).
//
// *_torch names reproduce torchvision on a PIL image: Pillow's resampling (resize_like_pil),
// torchvision's size arithmetic and crop offsets (Python's round-half-even), ToTensor + Normalize
// in float32. *_albu names reproduce albumentations 1.3.1 on a cv2 image: cv2.resize with
// INTER_LINEAR (not antialiased: the pixels OML's *_albu users saw) and albumentations' float32
// Normalize. docs/data.md#omls-transform-names has the parity figures.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "oml/common/error.h"
#include "oml/config/reader.h"
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "transform_parts.h"

namespace oml::data::detail {

namespace {

// Python's round() and albumentations' py3round: halves go to the even neighbour (the default
// floating-point rounding mode).
int round_half_even(double x) { return static_cast<int>(std::nearbyint(x)); }

enum class Geometry {
  keep,                 ///< ToTensor + Normalize only
  resize_square,        ///< Resize((im_size, im_size))
  shorter_side_crop,    ///< Resize(im_size) (shorter side) + CenterCrop(crop_size)
  random_resized_crop,  ///< RandomResizedCrop(im_size, scale=(min_scale, 1))
  longest_side_pad,     ///< albumentations' LongestMaxSize(im_size) + PadIfNeeded(white)
};

struct OmlOptions {
  std::string name;
  Geometry geometry = Geometry::keep;
  PilFilter filter = PilFilter::bilinear;
  int im_size = 224;
  int crop_size = 224;
  double min_scale = 0.2;
  bool hflip = false;  ///< RandomHorizontalFlip(p=0.5) after the geometry
  Normalisation norm;
  NormStyle style = NormStyle::torchvision;
};

// torchvision's Resize(size) for an int size: the shorter side becomes `size`, the longer one
// int(size * long / short) (truncated). Returns {width, height}.
std::pair<int, int> shorter_side_size(int width, int height, int size, const std::string& transform) {
  // int64 products in double, truncated as torchvision's int(): exact for any int sides.
  if (width <= height) {
    return checked_resize(size, std::trunc(static_cast<double>(int64_t{size} * height) / width), width,
                          height, transform);
  }
  return checked_resize(std::trunc(static_cast<double>(int64_t{size} * width) / height), size, width, height,
                        transform);
}

// torchvision's CenterCrop: zero (black) padding when the crop is larger than the image, then
// offsets int(round((size - crop) / 2)).
cv::Mat center_crop(const cv::Mat& image, int crop) {
  cv::Mat src = image;
  if (crop > src.cols || crop > src.rows) {
    const int left = crop > src.cols ? (crop - src.cols) / 2 : 0;
    const int top = crop > src.rows ? (crop - src.rows) / 2 : 0;
    const int right = crop > src.cols ? (crop - src.cols + 1) / 2 : 0;
    const int bottom = crop > src.rows ? (crop - src.rows + 1) / 2 : 0;
    cv::copyMakeBorder(image, src, top, bottom, left, right, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
  }
  const int top = round_half_even((src.rows - crop) / 2.0);
  const int left = round_half_even((src.cols - crop) / 2.0);
  return src(cv::Rect(left, top, crop, crop));
}

// torchvision's RandomResizedCrop.get_params with ratio (3/4, 4/3): 10 tries at an area fraction
// uniform in [min_scale, 1] and a log-uniform aspect ratio, then the central crop of the ratio's
// bound. Draws come from the item's KeyedRandom instead of torch's global generator.
cv::Rect random_resized_crop(int width, int height, double min_scale, KeyedRandom& rng) {
  const double area = static_cast<double>(width) * height;
  const double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
  const double log_lo = std::log(min_ratio), log_hi = std::log(max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(min_scale, 1.0);
    const double ratio = std::exp(rng.uniform(log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target * ratio));
    const int h = round_half_even(std::sqrt(target / ratio));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const auto top = static_cast<int>(rng.integer(0, height - h + 1));
      const auto left = static_cast<int>(rng.integer(0, width - w + 1));
      return {left, top, w, h};
    }
  }
  int w = width, h = height;
  const double in_ratio = static_cast<double>(width) / height;
  if (in_ratio < min_ratio) {
    h = round_half_even(w / min_ratio);
  } else if (in_ratio > max_ratio) {
    w = round_half_even(h * max_ratio);
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

class OmlTransform : public Transform {
 public:
  explicit OmlTransform(OmlOptions o) : o_(std::move(o)) {}

  at::Tensor apply(const at::Tensor& image, const RandomKey& key) const override {
    check_input(image);
    const cv::Mat src = as_mat(image);
    KeyedRandom rng(key);
    cv::Mat out;
    switch (o_.geometry) {
      case Geometry::keep:
        out = src;
        break;
      case Geometry::resize_square:
        out = resize_pil(src, o_.im_size, o_.im_size, o_.filter);
        break;
      case Geometry::shorter_side_crop: {
        const auto [width, height] = shorter_side_size(src.cols, src.rows, o_.im_size, o_.name);
        out = center_crop(resize_pil(src, width, height, o_.filter), o_.crop_size);
        break;
      }
      case Geometry::random_resized_crop:
        out = resize_pil(src(random_resized_crop(src.cols, src.rows, o_.min_scale, rng)), o_.im_size,
                         o_.im_size, o_.filter);
        break;
      case Geometry::longest_side_pad:
        out = longest_side_pad(src, o_.im_size);
        break;
    }
    if (o_.hflip && rng.bernoulli(0.5)) {
      cv::Mat flipped;
      cv::flip(out, flipped, 1);
      out = flipped;
    }
    return normalise_u8(out, o_.norm, o_.style);
  }

  std::string describe() const override {
    std::ostringstream out;
    out << o_.name << "(";
    if (o_.geometry != Geometry::keep) out << "im_size=" << o_.im_size << ", ";
    if (o_.geometry == Geometry::shorter_side_crop) out << "crop_size=" << o_.crop_size << ", ";
    if (o_.geometry == Geometry::random_resized_crop) out << "min_scale=" << o_.min_scale << ", ";
    out << describe_norm(o_.norm) << ")";
    return out.str();
  }

 private:
  OmlOptions o_;
};

// ---- factories --------------------------------------------------------------------------------

// Which args a name takes, as OML's functions: `im_size` required or with OML's default,
// `crop_size` / `min_scale` where OML has them, mean/std unless the name fixes them (CLIP).
struct ArgSpec {
  bool im_size = false;
  bool im_size_required = false;
  bool crop_size = false;
  bool min_scale = false;
  bool norm = true;
};

using TransformRegistry = decltype(Registries::transforms);

std::shared_ptr<Transform> build_oml(const OmlOptions& o, const NoContext&) {
  return std::make_shared<OmlTransform>(o);
}

// Registers `name`: `defaults` with the args `spec` allows read over them.
void add_oml(TransformRegistry& t, OmlOptions defaults, ArgSpec spec, std::string help) {
  const std::string name = defaults.name;
  const auto parse = [defaults, spec](config::ArgsReader& r) {
    OmlOptions o = defaults;
    if (spec.im_size)
      spec.im_size_required ? r.required("im_size", o.im_size) : r.optional("im_size", o.im_size);
    if (spec.crop_size) r.optional("crop_size", o.crop_size);
    if (spec.min_scale) r.optional("min_scale", o.min_scale);
    if (spec.norm) read_normalisation(r, o.norm);
    r.check([&] {
      const config::Node& args = r.node();
      if (spec.norm) check_normalisation(args, o.norm);
      if (spec.im_size) check_positive(args, "im_size", o.im_size);
      if (spec.crop_size) check_positive(args, "crop_size", o.crop_size);
      if (spec.min_scale && !(o.min_scale > 0 && o.min_scale <= 1)) {
        args["min_scale"].fail("expected a fraction in (0, 1], got " + std::to_string(o.min_scale));
      }
    });
    return o;
  };
  t.add(name, parse, build_oml, std::move(help));
}

OmlOptions options(const std::string& name, Geometry geometry, PilFilter filter, NormStyle style) {
  OmlOptions o;
  o.name = name;
  o.geometry = geometry;
  o.filter = filter;
  o.style = style;
  return o;
}

Normalisation clip_norm() {
  Normalisation n;
  n.mean.assign(kClipMean.begin(), kClipMean.end());
  n.std.assign(kClipStd.begin(), kClipStd.end());
  return n;
}

// The per-weights transforms: fixed, no args.
void add_fixed(TransformRegistry& t, OmlOptions o, std::string help) {
  const std::string name = o.name;
  const auto parse = [o](config::ArgsReader& r) {
    const config::Node& args = r.node();
    if (args.is_map() && !args.keys().empty()) {
      const std::string key = args.keys().front();
      args.key_node(key).fail("unknown key '" + key + "' in " + r.component() +
                              " args (a per-weights transform takes none)");
    }
    return o;
  };
  t.add(name, parse, build_oml, std::move(help));
}

}  // namespace

cv::Mat longest_side_pad(const cv::Mat& src, int size) {
  // LongestMaxSize: scale = size / max(w, h); sides py3round(side * scale); cv2 INTER_LINEAR.
  cv::Mat resized = src;
  const double scale = size / static_cast<double>(std::max(src.cols, src.rows));
  if (scale != 1.0) {
    const int width = std::max(1, round_half_even(src.cols * scale));
    const int height = std::max(1, round_half_even(src.rows * scale));
    if (width != src.cols || height != src.rows) {
      cv::resize(src, resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
    }
  }
  // PadIfNeeded(size, size), centred: top int((size - h) / 2), the rest at the bottom.
  const int pad_h = std::max(0, size - resized.rows), pad_w = std::max(0, size - resized.cols);
  if (pad_h == 0 && pad_w == 0) return resized;
  cv::Mat padded;
  cv::copyMakeBorder(resized, padded, pad_h / 2, pad_h - pad_h / 2, pad_w / 2, pad_w - pad_w / 2,
                     cv::BORDER_CONSTANT, cv::Scalar(255, 255, 255));
  return padded;
}

void register_oml_transforms(Registries& registries) {
  auto& t = registries.transforms;
  const auto torch = NormStyle::torchvision;
  const auto albu = NormStyle::albumentations;
  const auto bilinear = PilFilter::bilinear, bicubic = PilFilter::bicubic;
  const std::string origin_note = " (OML's name; pixels as torchvision on a PIL image)";

  ArgSpec norm_only;
  ArgSpec im_required;
  im_required.im_size = im_required.im_size_required = true;
  ArgSpec hypvit_val = im_required;
  hypvit_val.im_size_required = false;
  hypvit_val.crop_size = true;
  ArgSpec hypvit_train = im_required;
  hypvit_train.im_size_required = false;
  hypvit_train.min_scale = true;
  ArgSpec clip = im_required;
  clip.norm = false;

  add_oml(t, options("norm_torch", Geometry::keep, bilinear, torch), norm_only,
          "`mean`, `std`; ToTensor + Normalize" + origin_note);
  add_oml(t, options("norm_resize_torch", Geometry::resize_square, bilinear, torch), im_required,
          "`im_size` (required), `mean`, `std`; Resize((im_size, im_size)) antialiased bilinear, normalise" +
              origin_note);
  add_oml(t, options("norm_resize_hypvit_torch", Geometry::shorter_side_crop, bicubic, torch), hypvit_val,
          "`im_size` 224, `crop_size` 224, `mean`, `std`; shorter side to im_size (bicubic), "
          "CenterCrop(crop_size), "
          "normalise" +
              origin_note);
  OmlOptions augs = options("augs_torch", Geometry::resize_square, bilinear, torch);
  augs.hflip = true;
  add_oml(t, augs, im_required,
          "`im_size` (required), `mean`, `std`; Resize((im_size, im_size)), horizontal flip p=0.5 (OML's "
          "ColorJitter() has no effect), normalise" +
              origin_note);
  OmlOptions hypvit = options("augs_hypvit_torch", Geometry::random_resized_crop, bicubic, torch);
  hypvit.hflip = true;
  add_oml(t, hypvit, hypvit_train,
          "`im_size` 224, `min_scale` 0.2, `mean`, `std`; RandomResizedCrop(scale=(min_scale, 1)) bicubic, "
          "horizontal flip p=0.5, normalise" +
              origin_note);
  OmlOptions unicom = options("unicom_transforms", Geometry::shorter_side_crop, bicubic, torch);
  unicom.norm = clip_norm();
  add_oml(t, unicom, clip,
          "`im_size` (required); shorter side to im_size (bicubic), CenterCrop(im_size), CLIP's mean/std" +
              origin_note);
  const std::string albu_note = " (OML's name; pixels as albumentations 1.3.1 with cv2)";
  add_oml(t, options("norm_albu", Geometry::keep, bilinear, albu), norm_only,
          "`mean`, `std`; albumentations' Normalize" + albu_note);
  add_oml(
      t, options("norm_resize_albu", Geometry::longest_side_pad, bilinear, albu), im_required,
      "`im_size` (required), `mean`, `std`; LongestMaxSize(im_size) with cv2 INTER_LINEAR, pad to a white "
      "square, normalise" +
          albu_note);
  OmlOptions albu_clip = options("norm_resize_albu_clip", Geometry::longest_side_pad, bilinear, albu);
  albu_clip.norm = clip_norm();
  add_oml(t, albu_clip, clip, "`im_size` (required); norm_resize_albu with CLIP's mean/std" + albu_note);
  t.add(
      "augs_albu", [](config::ArgsReader& r) { return parse_sized_norm(r, /*im_size_required=*/true); },
      [](const SizedNorm& a, const NoContext&) { return make_augs_albu(a); },
      "`im_size` (required), `mean`, `std`; OML's CUB/CARS training augmentations (albumentations-style, "
      "matched in distribution: docs/data.md#augs_albu)");

  // TRANSFORMS_FOR_PRETRAINED: the transform OML pairs with each zoo weights name.
  const auto per_weights = [&](const std::string& weights, OmlOptions o, const std::string& what) {
    o.name = weights;
    add_fixed(t, o, "no args; the transform OML pairs with the `" + weights + "` weights: " + what);
  };
  const auto hypvit_crop = [&](int im_size, int crop_size) {
    OmlOptions o = options("", Geometry::shorter_side_crop, bicubic, torch);
    o.im_size = im_size;
    o.crop_size = crop_size;
    return o;
  };
  const auto square = [&] {
    OmlOptions o = options("", Geometry::resize_square, bilinear, torch);
    o.im_size = 224;
    return o;
  };
  for (const char* w :
       {"resnet50_moco_v2", "resnet18_imagenet1k_v1", "resnet34_imagenet1k_v1", "resnet50_imagenet1k_v1",
        "resnet101_imagenet1k_v1", "resnet152_imagenet1k_v1", "vits16_224_mlp_384_inshop"}) {
    per_weights(w, hypvit_crop(256, 224), "norm_resize_hypvit_torch(im_size=256, crop_size=224)");
  }
  for (const char* w : {"vitb8_dino", "vitb16_dino", "vits8_dino", "vits16_dino"}) {
    per_weights(w, square(), "norm_resize_torch(im_size=224)");
  }
  for (const char* w : {"vitb14_dinov2", "vitb14_reg_dinov2", "vitl14_dinov2", "vitl14_reg_dinov2",
                        "vits14_dinov2", "vits14_reg_dinov2", "vits16_inshop", "vits16_sop"}) {
    per_weights(w, hypvit_crop(224, 224), "norm_resize_hypvit_torch(im_size=224, crop_size=224)");
  }
  for (const char* w : {"vits16_cars", "vits16_cub"}) {
    OmlOptions o = options("", Geometry::longest_side_pad, bilinear, albu);
    o.im_size = 224;
    per_weights(w, o, "norm_resize_albu(im_size=224)");
  }
  for (const char* w : {"sber_vitb32_224", "sber_vitb16_224", "sber_vitl14_224", "openai_vitb32_224",
                        "openai_vitb16_224", "openai_vitl14_224"}) {
    OmlOptions o = options("", Geometry::longest_side_pad, bilinear, albu);
    o.im_size = 224;
    o.norm = clip_norm();
    per_weights(w, o, "norm_resize_albu_clip(im_size=224)");
  }
  for (const auto& [w, size] : std::vector<std::pair<std::string, int>>{{"vitb32_unicom", 224},
                                                                        {"vitb16_unicom", 224},
                                                                        {"vitl14_unicom", 224},
                                                                        {"vitl14_336px_unicom", 336}}) {
    OmlOptions o = hypvit_crop(size, size);
    o.norm = clip_norm();
    per_weights(w, o, "unicom_transforms(im_size=" + std::to_string(size) + ")");
  }
}

}  // namespace oml::data::detail
