// Image decoding and the built-in transforms: colour handling, bbox crops, corrupt files, and
// every transform's output shape, range and determinism.
#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

// clang-format off
#include <jpeglib.h>  // after <cstdio>: it needs FILE
// clang-format on

#include "data/jpeg_decode.h"  // white box: the scan limit
#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/image.h"
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace data_image_tests {

using Catch::Matchers::Contains;
using oml::DataError;
using oml::data::RandomKey;

namespace {

// A deterministic RGB test pattern [H, W, 3].
at::Tensor pattern(int64_t height, int64_t width) {
  auto y = torch::arange(height).view({height, 1, 1}).expand({height, width, 3});
  auto x = torch::arange(width).view({1, width, 1}).expand({height, width, 3});
  auto c = torch::arange(3).view({1, 1, 3}).expand({height, width, 3});
  return ((y * 7 + x * 3 + c * 80) % 256).to(torch::kUInt8).contiguous();
}

std::shared_ptr<oml::data::Transform> make_transform(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(yaml, "t.yaml");
  return oml::registries().transforms.create(oml::config::parse_component(doc.root(), "transform"));
}

// Undoes ImageNet normalisation back to [0, 1].
at::Tensor unnormalise(const at::Tensor& x) {
  const auto mean = torch::tensor({0.485, 0.456, 0.406}, torch::kFloat32).view({3, 1, 1});
  const auto std = torch::tensor({0.229, 0.224, 0.225}, torch::kFloat32).view({3, 1, 1});
  return x * std + mean;
}

}  // namespace

TEST_CASE("PNG and JPEG round-trip to RGB, and grayscale and RGBA become three channels", "[data][image]") {
  const auto image = pattern(20, 30);
  const auto png = oml::data::decode_image(oml::data::encode_image(image, "x.png"), "x.png");
  CHECK(png.sizes() == image.sizes());
  CHECK(torch::equal(png, image));
  const auto jpeg = oml::data::decode_image(oml::data::encode_image(image, "x.jpg", 100), "x.jpg");
  CHECK(jpeg.sizes() == image.sizes());
  // JPEG is lossy; a solid colour shows that channels keep their RGB order.
  const auto solid =
      torch::tensor({200, 50, 10}, torch::kUInt8).view({1, 1, 3}).expand({16, 16, 3}).contiguous();
  const auto decoded = oml::data::decode_image(oml::data::encode_image(solid, "s.jpg", 100), "s.jpg");
  CHECK(oml::test::max_abs_diff(decoded, solid) <= 3);

  const auto gray = image.select(2, 1).contiguous();
  const auto from_gray = oml::data::decode_image(oml::data::encode_image(gray, "g.png"), "g.png");
  REQUIRE(from_gray.sizes() == image.sizes());
  for (int c = 0; c < 3; ++c) CHECK(torch::equal(from_gray.select(2, c), gray));
}

TEST_CASE("RGBA PNGs lose their alpha channel and keep RGB order", "[data][image]") {
  const auto image = pattern(4, 5);
  const auto rgba = torch::cat({image, torch::full({4, 5, 1}, 128, torch::kUInt8)}, 2).contiguous();
  CHECK(torch::equal(oml::data::decode_image(oml::data::encode_image(rgba, "p.png"), "p.png"), image));
}

namespace {
// What `work` printed on this process's stderr (file descriptor 2, where C libraries print).
std::string stderr_of(const std::function<void()>& work) {
  oml::test::TempDir dir;
  const std::string path = (dir / "stderr.txt").string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(file, 2);
  ::close(file);
  work();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  return oml::test::read_file(path);
}
}  // namespace

namespace {

// A 16x16 grayscale progressive JPEG written by libjpeg with every coefficient refined bit by
// bit: one DC band and 63 AC bands, each first sent at point transform `first_al` and then
// refined once per bit (1 + first_al scans a band). Valid, and 64 * (1 + first_al) scans long.
std::string progressive_jpeg(int first_al) {
  jpeg_compress_struct c{};
  jpeg_error_mgr errors{};
  c.err = jpeg_std_error(&errors);
  jpeg_create_compress(&c);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buffer, &size);
  c.image_width = 16;
  c.image_height = 16;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  std::vector<jpeg_scan_info> scans;
  for (int band = 0; band < 64; ++band) {
    for (int al = first_al; al >= 0; --al) {
      jpeg_scan_info scan{};
      scan.comps_in_scan = 1;
      scan.component_index[0] = 0;
      scan.Ss = band;
      scan.Se = band;
      scan.Ah = al == first_al ? 0 : al + 1;
      scan.Al = al;
      scans.push_back(scan);
    }
  }
  c.scan_info = scans.data();
  c.num_scans = static_cast<int>(scans.size());
  jpeg_start_compress(&c, TRUE);
  std::vector<JSAMPLE> row(16);
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < 16; ++x) row[x] = static_cast<JSAMPLE>(x * 16 + c.next_scanline);
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

// `jpeg` with its frame header's height (SOF0, FF C0: length, precision, then height) replaced.
std::string with_sof_height(std::string jpeg, int height) {
  const std::size_t sof = jpeg.find("\xFF\xC0");
  REQUIRE(sof != std::string::npos);
  jpeg[sof + 5] = static_cast<char>(height >> 8);
  jpeg[sof + 6] = static_cast<char>(height & 0xFF);
  return jpeg;
}

}  // namespace

TEST_CASE("A JPEG whose data libjpeg finds damaged is a DataError, never grey pixels",
          "[data][image][jpeg]") {
  const std::string jpeg = oml::data::encode_image(pattern(64, 64), "x.jpg");
  // The header promises twice the rows its scan holds: libjpeg would fill the rest with grey
  // (OpenCV's imdecode and PIL both return such an image) and only print a warning.
  const std::string printed = stderr_of([&] {
    CHECK_THROWS_WITH(
        oml::data::decode_image(with_sof_height(jpeg, 128), "/d/tall.jpg"),
        Contains("image /d/tall.jpg is a corrupt JPEG: Corrupt JPEG data: premature end of data "
                 "segment"));
  });
  CHECK(printed.empty());  // libjpeg's warning is the message, not a line of its own on stderr
  // Bytes between the data and the end marker are a harmless warning (cameras write them).
  std::string padded = jpeg;
  padded.insert(padded.size() - 2, std::string(5, '\0'));
  CHECK(
      torch::equal(oml::data::decode_image(padded, "/d/padded.jpg"), oml::data::decode_image(jpeg, "x.jpg")));
  // Progressive files decode; one of hundreds of whole-image scans is refused before it costs minutes.
  const auto few = oml::data::decode_image(progressive_jpeg(1), "/d/few.jpg");
  CHECK(few.sizes() == torch::IntArrayRef({16, 16, 3}));
  const std::string many = progressive_jpeg(10);
  REQUIRE(64 * 11 > oml::data::detail::kMaxJpegScans);
  CHECK_THROWS_WITH(oml::data::decode_image(many, "/d/many.jpg"),
                    Contains("/d/many.jpg is a corrupt JPEG: it has more than 500 scans"));
}

TEST_CASE("Corrupt, empty and truncated images are DataErrors naming the file", "[data][image]") {
  const std::string jpeg = oml::data::encode_image(pattern(64, 64), "x.jpg");
  CHECK_THROWS_WITH(oml::data::decode_image(jpeg.substr(0, jpeg.size() / 2), "/d/cut.jpg"),
                    Contains("/d/cut.jpg") && Contains("truncated"));
  CHECK_THROWS_AS(oml::data::decode_image(jpeg.substr(0, jpeg.size() - 2), "/d/cut.jpg"), DataError);
  CHECK_NOTHROW(oml::data::decode_image(jpeg + std::string(10, '\0'), "/d/padded.jpg"));
  const std::string png = oml::data::encode_image(pattern(64, 64), "x.png");
  CHECK_THROWS_WITH(oml::data::decode_image(png.substr(0, png.size() / 2), "/d/cut.png"),
                    Contains("/d/cut.png"));
  // A damaged PNG is our one message, without libpng's "libpng error: ..." line before it.
  std::string flipped = png;
  flipped[png.size() / 2] = static_cast<char>(flipped[png.size() / 2] ^ 0x40);
  const std::string printed = stderr_of([&] {
    CHECK_THROWS_WITH(
        oml::data::decode_image(png.substr(0, png.size() / 2), "/d/cut.png"),
        Contains("/d/cut.png") && Contains("truncated or corrupt PNG") && Contains("runs past"));
    CHECK_THROWS_WITH(oml::data::decode_image(flipped, "/d/flip.png"),
                      Contains("/d/flip.png") && Contains("fails its CRC check"));
  });
  CHECK(printed.empty());
  CHECK_NOTHROW(oml::data::decode_image(png + "trailing bytes", "/d/padded.png"));
  CHECK_THROWS_WITH(
      oml::data::decode_image("not an image at all", "/d/text.png"),
      Contains("/d/text.png") && Contains("is not a JPEG, PNG, BMP, WebP, TIFF or PNM/PFM file"));
  CHECK_THROWS_WITH(oml::data::decode_image("", "/d/empty.png"), Contains("empty file"));
  CHECK_THROWS_WITH(oml::data::read_file_bytes("/no/such.png"), Contains("/no/such.png"));
}

namespace {

// A PFM file: `kind` "PF" (RGB) or "Pf" (grey), rows stored bottom to top, little-endian samples
// when `scale` is negative.
std::string pfm_bytes(const std::string& kind, int width, int height, const std::string& scale,
                      const std::vector<float>& samples) {
  std::string out = kind + "\n" + std::to_string(width) + " " + std::to_string(height) + "\n" + scale + "\n";
  const bool little = scale.front() == '-';
  for (const float value : samples) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(bits >> (little ? 8 * i : 24 - 8 * i)));
  }
  return out;
}

}  // namespace

TEST_CASE("PFM decodes by its specification, and never through a temporary file", "[data][image]") {
  // OpenCV decodes PFM only from a file: it wrote each one to $OPENCV_TEMP_PATH (/tmp) and left
  // the file there whenever its own header parser disagreed (this header's blank line).
  oml::test::TempDir temp;
  const oml::test::ScopedEnv opencv_temp("OPENCV_TEMP_PATH", temp.path().string());
  // 3 wide, 2 high; stored rows are bottom first: the image's top row is the second stored row.
  std::vector<float> samples;
  for (int i = 0; i < 18; ++i) samples.push_back(static_cast<float>(i) * 14.0f / 255.0f);
  const auto expected = [&](float divide) {
    auto rows = torch::tensor(samples).view({2, 3, 3}).flip(0);
    return (rows * 255.0 / divide).round().clamp(0, 255).to(torch::kUInt8);
  };
  for (const std::string scale : {"-1.0", "1", "-2.0"}) {
    INFO("scale " << scale);
    const std::string bytes = pfm_bytes("PF", 3, 2, scale, samples);
    const auto decoded = oml::data::decode_image(bytes, "x.pfm");
    CHECK(torch::equal(decoded, expected(scale == "-2.0" ? 2.0f : 1.0f)));
  }
  // Grey: one channel, repeated into RGB.
  const auto grey = oml::data::decode_image(pfm_bytes("Pf", 3, 2, "-1", {0, 0.5f, 1, 1, 0.5f, 0}), "g.pfm");
  CHECK(torch::equal(grey.select(2, 0),
                     torch::tensor({255, 128, 0, 0, 128, 255}).view({2, 3}).to(torch::kUInt8)));
  CHECK(torch::equal(grey.select(2, 1), grey.select(2, 2)));
  // What OpenCV would have decoded through a temporary file.
  std::string odd = pfm_bytes("PF", 2, 2, "-1.0", std::vector<float>(12, 0.25f));
  odd.insert(3, "\n");
  CHECK(oml::data::decode_image(odd, "odd.pfm").sizes() == at::IntArrayRef{2, 2, 3});
  CHECK_THROWS_WITH(oml::data::decode_image(odd.substr(0, odd.size() - 1), "/d/cut.pfm"),
                    Contains("/d/cut.pfm") && Contains("truncated PFM"));
  CHECK_THROWS_WITH(oml::data::decode_image(pfm_bytes("PF", 1, 1, "zero", {0, 0, 0}), "/d/s.pfm"),
                    Contains("/d/s.pfm") && Contains("scale 'zero'"));
  CHECK_THROWS_WITH(oml::data::decode_image(pfm_bytes("PF", 1, 1, "0", {0, 0, 0}), "/d/s.pfm"),
                    Contains("not a non-zero number"));
  CHECK(std::filesystem::is_empty(temp.path()));
}

TEST_CASE("Bounding boxes crop before transforms and must lie inside the image", "[data][image]") {
  const auto image = pattern(10, 12);
  const auto crop = oml::data::crop_image(image, {2, 7, 1, 4}, "a.png");
  CHECK(crop.sizes() == std::vector<int64_t>{3, 5, 3});
  CHECK(torch::equal(crop, image.slice(0, 1, 4).slice(1, 2, 7)));
  CHECK_THROWS_WITH(oml::data::crop_image(image, {2, 13, 1, 4}, "a.png"),
                    Contains("a.png is 12x10") && Contains("x_2=13"));
}

TEST_CASE("norm keeps the size and normalises with ImageNet statistics", "[data][transforms]") {
  const auto image = pattern(9, 11);
  const auto out = make_transform("name: norm")->apply(image, {});
  REQUIRE(out.sizes() == std::vector<int64_t>{3, 9, 11});
  CHECK(out.scalar_type() == torch::kFloat32);
  const auto expected = image.permute({2, 0, 1}).to(torch::kFloat32) / 255.0;
  CHECK(oml::test::max_abs_diff(unnormalise(out), expected) < 1e-5);
  const auto plain =
      make_transform("{name: norm, args: {mean: [0, 0, 0], std: [1, 1, 1]}}")->apply(image, {});
  CHECK(plain.min().item<float>() >= 0.0f);
  CHECK(plain.max().item<float>() <= 1.0f);
}

TEST_CASE("An image elongated past what a resize may allocate is a data error, not gigabytes",
          "[data][transforms]") {
  // 1 x 65535 decodes within any pixel limit; resized so that its shorter side is 256 it would
  // be 256 x 16,776,960 pixels (12.9 GB).
  const at::Tensor thin = torch::full({65535, 1, 3}, 128, torch::kUInt8);
  for (const std::string yaml : {"{name: norm_resize_hypvit_torch, args: {im_size: 256}}",
                                 "{name: norm_resize_center_crop, args: {im_size: 256, crop_size: 224}}"}) {
    INFO(yaml);
    CHECK_THROWS_AS(make_transform(yaml)->apply(thin, {}), oml::DataError);
    CHECK_THROWS_WITH(
        make_transform(yaml)->apply(thin, {}),
        Contains("would resize this 1x65535 image to 256x16776960 pixels, more than the 67108864"));
  }
  // As elongated as the bound allows (256 x 262,144 once resized): resized and cropped as before.
  const at::Tensor long_strip = torch::full({1024, 1, 3}, 128, torch::kUInt8);
  CHECK(make_transform("{name: norm_resize_hypvit_torch, args: {im_size: 256}}")
            ->apply(long_strip, {})
            .sizes() == std::vector<int64_t>{3, 224, 224});
}

TEST_CASE("resize, norm_resize and norm_resize_center_crop give fixed sizes", "[data][transforms]") {
  const auto wide = pattern(30, 60);
  const auto resized = make_transform("{name: resize, args: {im_size: 32}}")->apply(wide, {});
  CHECK(resized.sizes() == std::vector<int64_t>{3, 32, 32});

  // Longest side 60 -> 32, so the height becomes 16, centred between white bands.
  const auto padded = make_transform("{name: norm_resize, args: {im_size: 32}}")->apply(wide, {});
  REQUIRE(padded.sizes() == std::vector<int64_t>{3, 32, 32});
  const auto pixels = unnormalise(padded);
  CHECK(pixels.slice(1, 0, 8).min().item<float>() > 0.999f);    // top band white
  CHECK(pixels.slice(1, 24, 32).min().item<float>() > 0.999f);  // bottom band white
  CHECK(pixels.slice(1, 8, 24).min().item<float>() < 0.5f);     // the image itself

  const auto cropped =
      make_transform("{name: norm_resize_center_crop, args: {im_size: 40, crop_size: 24}}")->apply(wide, {});
  CHECK(cropped.sizes() == std::vector<int64_t>{3, 24, 24});
  for (const auto& out : {resized, padded, cropped}) {
    const auto px = unnormalise(out);
    CHECK(px.min().item<float>() >= -1e-5f);
    CHECK(px.max().item<float>() <= 1.0f + 1e-5f);
  }
}

TEST_CASE("augs gives im_size outputs in range, deterministic per (seed, epoch, index)",
          "[data][transforms]") {
  const auto augs = make_transform("{name: augs, args: {im_size: 48, min_scale: 0.3}}");
  const auto image = pattern(50, 70);
  const auto a = augs->apply(image, RandomKey{1, 0, 5});
  REQUIRE(a.sizes() == std::vector<int64_t>{3, 48, 48});
  const auto px = unnormalise(a);
  CHECK(px.min().item<float>() >= -1e-5f);
  CHECK(px.max().item<float>() <= 1.0f + 1e-5f);
  CHECK(torch::equal(a, augs->apply(image, RandomKey{1, 0, 5})));
  CHECK_FALSE(torch::equal(a, augs->apply(image, RandomKey{1, 1, 5})));
  CHECK_FALSE(torch::equal(a, augs->apply(image, RandomKey{1, 0, 6})));
  CHECK_FALSE(torch::equal(a, augs->apply(image, RandomKey{2, 0, 5})));
  // Without randomness left (no crop, flip or jitter), augs equals resize.
  const auto still = make_transform(
      "{name: augs, args: {im_size: 48, min_scale: 1.0, min_ratio: 1.4, max_ratio: 1.4, hflip_p: 0, "
      "brightness: 0, "
      "contrast: 0, saturation: 0}}");
  const auto resized = make_transform("{name: resize, args: {im_size: 48}}")->apply(image, {});
  CHECK(oml::test::max_abs_diff(still->apply(image, RandomKey{3, 0, 0}), resized) < 1e-4);
}

TEST_CASE("Transform arguments are checked with the config location", "[data][transforms]") {
  CHECK_THROWS_WITH(make_transform("{name: resize, args: {im_size: 0}}"),
                    Contains("t.yaml:1") && Contains("im_size") && Contains("positive"));
  CHECK_THROWS_WITH(make_transform("{name: norm, args: {mean: [0.5]}}"), Contains("expected 3 values"));
  CHECK_THROWS_WITH(make_transform("{name: augs, args: {min_scale: 1.5}}"), Contains("min_scale"));
  CHECK_THROWS_WITH(make_transform("{name: norm_resize_center_crop, args: {im_size: 10, crop_size: 20}}"),
                    Contains("crop_size <= im_size"));
  CHECK_THROWS_WITH(make_transform("{name: augs, args: {im_sz: 3}}"), Contains("im_sz"));
}

TEST_CASE("KeyedRandom draws are a pure function of the key", "[data][transforms]") {
  oml::data::KeyedRandom a(RandomKey{7, 2, 3}), b(RandomKey{7, 2, 3}), c(RandomKey{7, 3, 2});
  for (int i = 0; i < 5; ++i) {
    const double x = a.uniform();
    CHECK(x == b.uniform());
    CHECK(x >= 0.0);
    CHECK(x < 1.0);
  }
  CHECK(a.next_u64() != c.next_u64());
}

}  // namespace data_image_tests
