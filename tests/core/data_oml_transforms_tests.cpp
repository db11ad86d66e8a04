// OML's transform names without Python: Pillow-style resampling invariants, albumentations'
// geometry (half-to-even sizes, white padding), the per-weights names, argument errors, and the
// augmentations' distributions with fixed keys. Parity with torchvision itself:
// transforms_parity_tests.cpp.
#include <torch/torch.h>

#include <map>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/albu_augs.h"
#include "oml/data/resample.h"
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace data_oml_transforms_tests {

using Catch::Matchers::Contains;
using oml::data::PilFilter;
using oml::data::RandomKey;

namespace {

std::shared_ptr<oml::data::Transform> make_transform(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(yaml, "t.yaml");
  return oml::registries().transforms.create(oml::config::parse_component(doc.root(), "transform"));
}

// Back from ImageNet normalisation to grey levels [0, 255].
at::Tensor to_grey_levels(const at::Tensor& x) {
  const auto mean = torch::tensor({0.485, 0.456, 0.406}, torch::kFloat32).view({3, 1, 1});
  const auto std = torch::tensor({0.229, 0.224, 0.225}, torch::kFloat32).view({3, 1, 1});
  return (x * std + mean) * 255;
}

// R = x, G = y, B = 0: an image whose pixels say where they came from (width, height <= 256).
at::Tensor coordinates(int64_t height, int64_t width) {
  auto x = torch::arange(width).view({1, width}).expand({height, width});
  auto y = torch::arange(height).view({height, 1}).expand({height, width});
  return torch::stack({x, y, torch::zeros_like(x)}, 2).to(torch::kUInt8).contiguous();
}

}  // namespace

TEST_CASE("resize_like_pil keeps constant images constant and equal sizes unchanged", "[data][transforms]") {
  const auto grey = torch::full({37, 53, 3}, 201, torch::kUInt8);
  for (const auto filter : {PilFilter::bilinear, PilFilter::bicubic}) {
    for (const auto& [h, w] :
         std::vector<std::pair<int64_t, int64_t>>{{224, 224}, {5, 11}, {37, 17}, {100, 53}}) {
      INFO(h << "x" << w);
      CHECK(torch::equal(oml::data::resize_like_pil(grey, h, w, filter),
                         torch::full({h, w, 3}, 201, torch::kUInt8)));
    }
    const auto image = torch::randint(0, 256, {20, 30, 3}, torch::kUInt8);
    CHECK(torch::equal(oml::data::resize_like_pil(image, 20, 30, filter), image));
  }
  // A 2x downscale of a ramp with the triangle filter stretched to 2 px: the mean of each pair
  // weighted 1/8, 3/8, 3/8, 1/8 across four pixels (the outer pixels clipped at the border).
  const auto ramp = torch::arange(0, 80, 10).to(torch::kUInt8).view({1, 8, 1}).expand({1, 8, 3}).contiguous();
  const auto half = oml::data::resize_like_pil(ramp, 1, 4, PilFilter::bilinear).select(2, 0).flatten();
  // Output 1 covers inputs 1..4 (values 10..40): (10 + 3 * 20 + 3 * 30 + 40) / 8 = 25.
  CHECK(half[1].item<int>() == 25);
  CHECK(half[2].item<int>() == 45);
}

TEST_CASE("norm_resize_albu rounds sides half to even, pads with white and normalises as albumentations",
          "[data][transforms]") {
  // 16 x 5 to a longest side of 8: the height 2.5 rounds to 2 (Python's round), padded 3 + 3.
  const auto dark = torch::full({5, 16, 3}, 10, torch::kUInt8);
  const auto out = make_transform("{name: norm_resize_albu, args: {im_size: 8}}")->apply(dark, {});
  REQUIRE(out.sizes() == torch::IntArrayRef({3, 8, 8}));
  const auto grey = to_grey_levels(out);
  for (int row : {0, 1, 2, 5, 6, 7}) CHECK(grey.select(1, row).min().item<double>() > 254.9);
  for (int row : {3, 4}) CHECK(grey.select(1, row).max().item<double>() < 10.1);
  // norm_albu and norm_torch differ only in float rounding.
  const auto image = torch::randint(0, 256, {9, 7, 3}, torch::kUInt8);
  const auto albu = make_transform("{name: norm_albu}")->apply(image, {});
  const auto torch_norm = make_transform("{name: norm_torch}")->apply(image, {});
  CHECK(oml::test::max_abs_diff(albu, torch_norm) <= 1e-6);
  CHECK(oml::test::max_abs_diff(to_grey_levels(albu), image.permute({2, 0, 1}).to(torch::kFloat32)) <= 1e-3);
}

TEST_CASE("OML's per-weights transform names build without args and give the weights' input size",
          "[data][transforms]") {
  const std::map<std::string, int64_t> sizes = {{"resnet50_moco_v2", 224},
                                                {"resnet18_imagenet1k_v1", 224},
                                                {"resnet34_imagenet1k_v1", 224},
                                                {"resnet50_imagenet1k_v1", 224},
                                                {"resnet101_imagenet1k_v1", 224},
                                                {"resnet152_imagenet1k_v1", 224},
                                                {"vitb8_dino", 224},
                                                {"vitb16_dino", 224},
                                                {"vits8_dino", 224},
                                                {"vits16_dino", 224},
                                                {"vitb14_dinov2", 224},
                                                {"vitb14_reg_dinov2", 224},
                                                {"vitl14_dinov2", 224},
                                                {"vitl14_reg_dinov2", 224},
                                                {"vits14_dinov2", 224},
                                                {"vits14_reg_dinov2", 224},
                                                {"sber_vitb32_224", 224},
                                                {"sber_vitb16_224", 224},
                                                {"sber_vitl14_224", 224},
                                                {"openai_vitb32_224", 224},
                                                {"openai_vitb16_224", 224},
                                                {"openai_vitl14_224", 224},
                                                {"vits16_inshop", 224},
                                                {"vits16_sop", 224},
                                                {"vits16_cars", 224},
                                                {"vits16_cub", 224},
                                                {"vits16_224_mlp_384_inshop", 224},
                                                {"vitb32_unicom", 224},
                                                {"vitb16_unicom", 224},
                                                {"vitl14_unicom", 224},
                                                {"vitl14_336px_unicom", 336}};
  const auto image = torch::randint(0, 256, {150, 100, 3}, torch::kUInt8);
  for (const auto& [name, size] : sizes) {
    INFO(name);
    const auto out = make_transform("{name: " + name + "}")->apply(image, {});
    CHECK(out.sizes() == torch::IntArrayRef({3, size, size}));
    CHECK_THROWS_WITH(make_transform("{name: " + name + ", args: {im_size: 224}}"),
                      Contains("im_size") && Contains("takes none"));
  }
  // vits16_cub is norm_resize_albu(224); resnet50_imagenet1k_v1 is norm_resize_hypvit_torch(256, 224).
  CHECK(torch::equal(make_transform("{name: vits16_cub}")->apply(image, {}),
                     make_transform("{name: norm_resize_albu, args: {im_size: 224}}")->apply(image, {})));
  CHECK(torch::equal(
      make_transform("{name: resnet50_imagenet1k_v1}")->apply(image, {}),
      make_transform("{name: norm_resize_hypvit_torch, args: {im_size: 256}}")->apply(image, {})));
}

TEST_CASE("OML's transform names check their args as OML's functions take them", "[data][transforms]") {
  CHECK_THROWS_AS(make_transform("{name: norm_resize_torch}"), oml::ConfigError);  // im_size has no default
  CHECK_THROWS_WITH(make_transform("{name: augs_albu, args: {im_sise: 224}}"), Contains("im_sise"));
  CHECK_THROWS_WITH(make_transform("{name: augs_hypvit_torch, args: {min_scale: 0}}"), Contains("min_scale"));
  CHECK_THROWS_WITH(make_transform("{name: norm_resize_albu_clip, args: {im_size: 224, mean: [0, 0, 0]}}"),
                    Contains("mean"));
  CHECK_THROWS_WITH(make_transform("{name: norm_torch, args: {std: [1, 0, 1]}}"), Contains("positive"));
  CHECK(make_transform("{name: augs_hypvit_torch}")->describe() ==
        "augs_hypvit_torch(im_size=224, min_scale=0.2, mean=[0.485,0.456,0.406], std=[0.229,0.224,0.225])");
}

TEST_CASE("augs_torch is norm_resize_torch, mirrored for half of the keys", "[data][transforms]") {
  const auto image = torch::randint(0, 256, {40, 60, 3}, torch::kUInt8);
  const auto plain = make_transform("{name: norm_resize_torch, args: {im_size: 32}}")->apply(image, {});
  const auto augs = make_transform("{name: augs_torch, args: {im_size: 32}}");
  int flipped = 0;
  const int n = 1000;
  for (int i = 0; i < n; ++i) {
    const auto out = augs->apply(image, RandomKey{7, 0, i});
    const bool same = torch::equal(out, plain), mirrored = torch::equal(out, plain.flip(2));
    REQUIRE((same || mirrored));
    flipped += mirrored;
  }
  CHECK(std::abs(flipped / double(n) - 0.5) < 0.05);
}

TEST_CASE("augs_hypvit_torch crops areas in [min_scale, 1] at ratios in [3/4, 4/3] and flips half of them",
          "[data][transforms]") {
  const int64_t width = 200, height = 150, out_size = 64;
  const auto image = coordinates(height, width);
  const auto augs = make_transform("{name: augs_hypvit_torch, args: {im_size: 64, min_scale: 0.2}}");
  const int n = 1000;
  int flips = 0;
  double min_area = 1, max_area = 0, min_ratio = 10, max_ratio = 0;
  for (int i = 0; i < n; ++i) {
    const auto grey = to_grey_levels(augs->apply(image, RandomKey{3, 1, i}));
    REQUIRE(grey.sizes() == torch::IntArrayRef({3, out_size, out_size}));
    // The first and last output columns sample x at 0.5 and out_size - 0.5 output pixels into
    // the crop: the crop's width is their distance scaled by out_size / (out_size - 1).
    const double left = grey[0].select(1, 0).mean().item<double>();
    const double right = grey[0].select(1, out_size - 1).mean().item<double>();
    const double top = grey[1].select(0, 0).mean().item<double>();
    const double bottom = grey[1].select(0, out_size - 1).mean().item<double>();
    flips += left > right;
    const double w = std::abs(right - left) * out_size / (out_size - 1);
    const double h = std::abs(bottom - top) * out_size / (out_size - 1);
    const double area = w * h / (width * height);
    min_area = std::min(min_area, area), max_area = std::max(max_area, area);
    min_ratio = std::min(min_ratio, w / h), max_ratio = std::max(max_ratio, w / h);
  }
  INFO("area fraction [" << min_area << ", " << max_area << "], ratio [" << min_ratio << ", " << max_ratio
                         << "], flips " << flips << " / " << n);
  CHECK(std::abs(flips / double(n) - 0.5) < 0.05);
  CHECK(min_area >= 0.2 * 0.9);
  CHECK(min_area <= 0.25);
  CHECK(max_area <= 1.02);
  CHECK(max_area >= 0.9);
  CHECK(min_ratio >= 0.75 * 0.93);
  CHECK(max_ratio <= 4.0 / 3.0 * 1.07);
  CHECK(min_ratio <= 0.8);
  CHECK(max_ratio >= 1.25);
}

TEST_CASE("augs_albu chooses its operations with OML's probabilities and is a pure function of the key",
          "[data][transforms]") {
  std::map<std::string, int> count;
  const int n = 8000;
  for (int i = 0; i < n; ++i) {
    const auto plan = oml::data::albu_augs_plan(RandomKey{11, 2, i});
    count["hflip"] += plan.hflip;
    for (const std::string* op : {&plan.spatial, &plan.blur, &plan.colour, &plan.channels, &plan.noise}) {
      count[op->empty() ? "none" : *op] += 1;
    }
    count["spatial"] += !plan.spatial.empty();
    count["blur_group"] += !plan.blur.empty();
    count["colour"] += !plan.colour.empty();
    count["channels"] += !plan.channels.empty();
    count["noise"] += !plan.noise.empty();
  }
  const auto rate = [&](const std::string& key) { return count[key] / double(n); };
  // OneOf(p) picks its child with probability p times the child's share of the children's p.
  const std::vector<std::pair<std::string, double>> expected = {{"hflip", 0.5},
                                                                {"spatial", 0.5},
                                                                {"perspective", 0.5 / 3},
                                                                {"affine", 0.5 / 3},
                                                                {"grid_distortion", 0.5 / 3},
                                                                {"blur_group", 0.5},
                                                                {"median_blur", 0.125},
                                                                {"gaussian_blur", 0.125},
                                                                {"colour", 0.8},
                                                                {"color_jitter", 0.8 * 0.5},
                                                                {"clahe", 0.8 * 0.1},
                                                                {"random_brightness_contrast", 0.8 * 0.1},
                                                                {"channels", 0.2},
                                                                {"to_gray", 0.2 * 0.8},
                                                                {"channel_shuffle", 0.2 * 0.1},
                                                                {"noise", 0.25},
                                                                {"coarse_dropout", 0.25 * 0.3},
                                                                {"gauss_noise", 0.25 * 0.7}};
  for (const auto& [key, p] : expected) {
    INFO(key << ": " << rate(key) << " expected " << p);
    CHECK(std::abs(rate(key) - p) <= 4 * std::sqrt(p * (1 - p) / n));  // 4 standard errors
  }

  // Every operation runs, outputs im_size squares with values from [0, 255] pixels, and the same
  // key gives the same tensor.
  const auto augs = make_transform("{name: augs_albu, args: {im_size: 48}}");
  const auto image = torch::randint(0, 256, {60, 45, 3}, torch::kUInt8);
  std::map<std::string, int> seen;
  for (int i = 0; i < 300; ++i) {
    const RandomKey key{5, 0, i};
    const auto out = augs->apply(image, key);
    REQUIRE(out.sizes() == torch::IntArrayRef({3, 48, 48}));
    const auto grey = to_grey_levels(out);
    CHECK(grey.min().item<double>() >= -0.01);
    CHECK(grey.max().item<double>() <= 255.01);
    if (i < 20) CHECK(torch::equal(out, augs->apply(image, key)));
    const auto plan = oml::data::albu_augs_plan(key);
    for (const std::string& op : {plan.spatial, plan.blur, plan.colour, plan.channels, plan.noise})
      seen[op] += 1;
  }
  CHECK(seen.size() == 1 + 3 + 4 + 6 + 3 + 2);  // "" and all 18 operations
}

TEST_CASE("defaults: the transforms group is chosen once per package, for train and validation",
          "[data][transforms][config][defaults]") {
  oml::test::TempDir dir;
  oml::test::write_file(dir / "config.yaml",
                        "defaults:\n"
                        "  - transforms@transforms_train: augs_hypvit_torch\n"
                        "  - transforms@transforms_val: norm_resize_hypvit_torch\n"
                        "  - _self_\n"
                        "transforms_val: {args: {im_size: 224}}\n");
  const auto document = oml::config::Document::from_file((dir / "config.yaml").string());
  const auto root = document.root().yaml();
  CHECK(root["transforms_train"]["name"].as<std::string>() == "augs_hypvit_torch");
  CHECK(root["transforms_train"]["args"]["im_size"].as<int>() == 224);
  CHECK(root["transforms_val"]["name"].as<std::string>() == "norm_resize_hypvit_torch");
  CHECK(root["transforms_val"]["args"]["im_size"].as<int>() == 224);
  CHECK(root["transforms_val"]["args"]["crop_size"].as<int>() == 224);
  // The same package twice is still an error.
  oml::test::write_file(dir / "twice.yaml",
                        "defaults:\n"
                        "  - transforms@transforms_val: norm_torch\n"
                        "  - transforms@transforms_val: norm_albu\n");
  CHECK_THROWS_WITH(oml::config::Document::from_file((dir / "twice.yaml").string()),
                    Contains("chosen twice"));
}

}  // namespace data_oml_transforms_tests
