// Image sizes read from headers before decoding (read_image_header), the pixel limit and the
// shared decode budget: every format decode_image accepts, written by OpenCV at odd sizes, and
// headers that lie, stop short or claim more pixels than allowed.
#include <torch/torch.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "oml/common/error.h"
#include "oml/data/image.h"
#include "support/support.h"

namespace data_image_header_tests {

using Catch::Matchers::Contains;
using oml::DataError;
using oml::data::DecodeBudget;
using oml::data::ImageLimits;
using oml::data::ImageTooLarge;
using oml::data::read_image_header;

namespace {

at::Tensor noise(int64_t height, int64_t width, int64_t channels) {
  torch::manual_seed(height * 1000 + width);
  return torch::randint(0, 256, {height, width, channels}, torch::kUInt8);
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

}  // namespace

TEST_CASE("Headers of every decoded format give the size OpenCV decodes", "[data][image][image_header]") {
  struct Case {
    std::string extension;
    std::string format;
    int64_t channels;
  };
  const std::vector<Case> cases = {{".png", "PNG", 3},   {".jpg", "JPEG", 3},  {".bmp", "BMP", 3},
                                   {".webp", "WebP", 3}, {".tiff", "TIFF", 3}, {".ppm", "PNM", 3},
                                   {".pgm", "PNM", 1},   {".pfm", "PFM", 3}};
  for (const Case& c : cases) {
    for (const auto& [h, w] :
         std::vector<std::pair<int64_t, int64_t>>{{57, 333}, {1, 1}, {480, 640}, {201, 90}}) {
      INFO(c.extension << " " << w << "x" << h);
      at::Tensor pixels = noise(h, w, c.channels);
      if (c.channels == 1) pixels = pixels.squeeze(2);
      std::string bytes;
      if (c.extension == ".pfm") {  // float samples: written by OpenCV from an RGB image too
        bytes = oml::data::encode_image(pixels, "x.ppm");
        bytes = oml::data::encode_image(oml::data::decode_image(bytes, "x.ppm"), "x.pfm");
      } else {
        bytes = oml::data::encode_image(pixels, "x" + c.extension);
      }
      const oml::data::ImageHeader header = read_image_header(bytes, "x" + c.extension);
      CHECK(header.format == c.format);
      CHECK(header.width == w);
      CHECK(header.height == h);
      CHECK(header.pixels() == w * h);
      CHECK(header.decode_bytes() >= w * h * 3);
      const at::Tensor decoded = oml::data::decode_image(bytes, "x" + c.extension);
      CHECK(decoded.size(0) == h);
      CHECK(decoded.size(1) == w);
      // OpenCV's PFM encoder writes 8-bit samples as floats 0..255; decoded as intensities (x255,
      // saturated, as OpenCV's decoder did), they are 0 or 255.
      if (c.extension == ".pfm") CHECK(torch::equal(decoded, (pixels > 0).to(torch::kUInt8) * 255));
    }
  }
  // Greyscale JPEGs report one channel, as they are decoded.
  const std::string grey_jpeg = oml::data::encode_image(noise(20, 30, 1).squeeze(2), "g.jpg");
  CHECK(read_image_header(grey_jpeg, "g.jpg").channels == 1);
}

TEST_CASE("Images over the pixel limit are ImageTooLarge before a byte is decoded",
          "[data][image][image_header]") {
  const std::string bomb = oml::test::png_bomb(12000, 12000);  // 144 Mpx of zeros in a few hundred KiB
  CHECK(bomb.size() < 2 * 1024 * 1024);
  const oml::data::ImageHeader header = read_image_header(bomb, "bomb.png");
  CHECK(header.pixels() == 144'000'000);
  // The default is PIL's MAX_IMAGE_PIXELS; the message names the file, both sizes and the key.
  CHECK_THROWS_AS(oml::data::decode_image(bomb, "/data/bomb.png"), ImageTooLarge);
  CHECK_THROWS_WITH(oml::data::decode_image(bomb, "/data/bomb.png"),
                    Contains("/data/bomb.png") && Contains("12000x12000 = 144000000 pixels") &&
                        Contains("limit of 89478485 pixels") && Contains("max_image_pixels"));
  ImageLimits small;
  small.max_pixels = 100;
  small.setting = "--max-image-pixels";
  const std::string ten_by_eleven = oml::data::encode_image(noise(11, 10, 3), "x.png");
  CHECK_THROWS_WITH(oml::data::decode_image(ten_by_eleven, "x.png", small),
                    Contains("10x11 = 110 pixels") && Contains("limit of 100 pixels (--max-image-pixels)"));
  small.max_pixels = 110;
  CHECK(oml::data::decode_image(ten_by_eleven, "x.png", small).size(0) == 11);
  // A JPEG's frame header says as much, wherever it is after the APPn segments.
  const std::string big_jpeg = oml::data::encode_image(noise(16, 20, 3), "x.jpg");
  small.max_pixels = 319;
  CHECK_THROWS_AS(oml::data::decode_image(big_jpeg, "x.jpg", small), ImageTooLarge);
}

TEST_CASE("Headers that stop short, lie or belong to another format are DataErrors naming the file",
          "[data][image][image_header]") {
  const std::string png = oml::data::encode_image(noise(8, 8, 3), "x.png");
  CHECK_THROWS_WITH(read_image_header(png.substr(0, 20), "/d/short.png"),
                    Contains("/d/short.png") && Contains("damaged PNG"));
  const std::string jpeg = oml::data::encode_image(noise(8, 8, 3), "x.jpg");
  CHECK_THROWS_WITH(read_image_header(jpeg.substr(0, 30), "/d/short.jpg"),
                    Contains("/d/short.jpg") && Contains("damaged JPEG"));
  // A zero size, in a header that is otherwise whole.
  std::string zero = png;
  for (int i = 16; i < 20; ++i) zero[i] = '\0';
  CHECK_THROWS_WITH(read_image_header(zero, "/d/zero.png"),
                    Contains("/d/zero.png") && Contains("size of 0x8"));
  // A header that claims another size than the pixels it holds: refused after decoding, not
  // returned at the wrong size (the CRC is fixed so that only the size lies).
  std::string lying = png;
  lying[23] = 9;  // height 8 -> 9
  const auto crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(lying.data() + 12), 17));
  lying.replace(29, 4, be32(crc));
  CHECK_THROWS_AS(oml::data::decode_image(lying, "/d/lying.png"), DataError);
  // Formats OpenCV would try but oml-cpp does not size: refused before any decoder sees them.
  CHECK_THROWS_WITH(read_image_header("GIF89a\x10\x00\x10\x00", "/d/x.gif"),
                    Contains("/d/x.gif") && Contains("is not a JPEG, PNG, BMP, WebP, TIFF or PNM/PFM file"));
  CHECK_THROWS_AS(read_image_header(std::string("\x00\x00\x00\x0cjP  \r\n\x87\n", 12), "/d/x.jp2"),
                  DataError);
  CHECK_THROWS_AS(read_image_header("DICM", "/d/x.dcm"), DataError);
  // Netpbm headers whose numbers are not numbers.
  CHECK_THROWS_WITH(read_image_header("P6\n12 x\n255\n", "/d/x.ppm"),
                    Contains("/d/x.ppm") && Contains("height is not a number"));
  CHECK_THROWS_WITH(read_image_header("P7\nWIDTH 4\nHEIGHT 4\nDEPTH 3\nMAXVAL 255\n", "/d/x.pam"),
                    Contains("no ENDHDR"));
  // A TIFF whose first IFD lies outside the file.
  CHECK_THROWS_WITH(read_image_header(std::string("II*\0\xff\xff\x00\x00", 8), "/d/x.tif"),
                    Contains("/d/x.tif") && Contains("outside the file"));
}

TEST_CASE("The decode budget holds concurrent decodes within it and refuses one larger than all of it",
          "[data][image][image_header]") {
  const std::string image = oml::data::encode_image(noise(100, 100, 3), "x.png");
  const int64_t need = read_image_header(image, "x.png").decode_bytes();
  DecodeBudget budget(need * 2);  // room for two at once
  ImageLimits limits;
  limits.budget = &budget;
  std::atomic<int64_t> peak{0};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      peak = std::max(peak.load(), budget.in_use());
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> decoders;
  for (int t = 0; t < 6; ++t) {
    decoders.emplace_back([&] {
      for (int i = 0; i < 20; ++i) CHECK(oml::data::decode_image(image, "x.png", limits).size(0) == 100);
    });
  }
  for (auto& d : decoders) d.join();
  done = true;
  watcher.join();
  CHECK(peak.load() <= 2 * need);
  CHECK(budget.in_use() == 0);
  DecodeBudget tiny(need - 1);
  limits.budget = &tiny;
  limits.budget_setting = "--decode-memory-mb budget";
  CHECK_THROWS_WITH(oml::data::decode_image(image, "x.png", limits),
                    Contains("x.png") && Contains("more than the whole --decode-memory-mb budget"));
  CHECK(tiny.in_use() == 0);
}

}  // namespace data_image_header_tests
