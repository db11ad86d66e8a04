// Fashion-MNIST: IDX files (gzip'd or not) -> 28x28 grayscale PNGs. The official train split
// becomes the train rows, the official test split the validation rows (each query and gallery).
#include <torch/torch.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "../../common/raw_io.h"
#include "convert_common.h"
#include "oml/common/error.h"
#include "oml/data/image.h"

namespace oml::data::convert {

namespace {

// The whole file, decompressed when it is gzip'd (zlib reads plain files unchanged).
std::string read_maybe_gzip(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  OML_CHECK(file != nullptr, DataError, "cannot open ", path.string());
  std::string out;
  char buffer[1 << 16];
  int got;
  while ((got = gzread(file, buffer, sizeof(buffer))) > 0) out.append(buffer, static_cast<std::size_t>(got));
  int code = Z_OK;
  const char* message = got < 0 ? gzerror(file, &code) : nullptr;
  const std::string reason = message ? message : "";
  gzclose(file);
  OML_CHECK(got == 0, DataError, path.string(), " cannot be decompressed: ", reason);
  return out;
}

using ::oml::detail::big_endian_u32;

// First of `name`.gz / `name` that exists.
fs::path find_idx(const fs::path& src, const std::string& name) {
  for (const fs::path& candidate : {src / (name + ".gz"), src / name}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  throw DataError(
      "--src " + src.string() + " has neither " + name + ".gz nor " + name +
      " (expected the four Fashion-MNIST IDX files: train-images-idx3-ubyte, train-labels-idx1-ubyte, "
      "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte)");
}

struct IdxImages {
  std::string bytes;
  int64_t count = 0, rows = 0, cols = 0;
  const uint8_t* image(int64_t i) const {
    return reinterpret_cast<const uint8_t*>(bytes.data()) + 16 + i * rows * cols;
  }
};

IdxImages read_images(const fs::path& path) {
  IdxImages out;
  out.bytes = read_maybe_gzip(path);
  OML_CHECK(out.bytes.size() >= 16 && big_endian_u32(out.bytes, 0) == 2051, DataError, path.string(),
            " is not an IDX image file (expected magic number 2051)");
  out.count = big_endian_u32(out.bytes, 4);
  out.rows = big_endian_u32(out.bytes, 8);
  out.cols = big_endian_u32(out.bytes, 12);
  OML_CHECK(out.rows > 0 && out.cols > 0 && out.rows <= 65535 && out.cols <= 65535, DataError, path.string(),
            ": its header announces images of ", out.rows, "x", out.cols,
            " pixels; IDX images have 1 to 65535 rows and columns");
  // Each dimension is a 32-bit count: their product can pass int64, and wrapped round it once
  // matched a 16-byte file.
  int64_t pixels = 0, expected = 0;
  const bool fits = !__builtin_mul_overflow(out.count, out.rows, &pixels) &&
                    !__builtin_mul_overflow(pixels, out.cols, &pixels) &&
                    !__builtin_add_overflow(pixels, int64_t{16}, &expected);
  OML_CHECK(fits && static_cast<int64_t>(out.bytes.size()) == expected, DataError, path.string(),
            " is truncated: its header announces ", out.count, " images of ", out.rows, "x", out.cols, " (",
            fits ? std::to_string(expected) : std::string("more than 2^63"), " bytes) but it holds ",
            out.bytes.size(), " bytes");
  return out;
}

std::vector<int64_t> read_labels(const fs::path& path) {
  const std::string bytes = read_maybe_gzip(path);
  OML_CHECK(bytes.size() >= 8 && big_endian_u32(bytes, 0) == 2049, DataError, path.string(),
            " is not an IDX label file (expected magic number 2049)");
  const int64_t count = big_endian_u32(bytes, 4);
  OML_CHECK(static_cast<int64_t>(bytes.size()) == 8 + count, DataError, path.string(),
            " is truncated: ", count, " labels announced, ", bytes.size() - 8, " present");
  std::vector<int64_t> labels(count);
  for (int64_t i = 0; i < count; ++i) labels[i] = static_cast<unsigned char>(bytes[8 + i]);
  return labels;
}

}  // namespace

ConvertReport convert_fashion_mnist(const ConvertOptions& options) {
  struct Part {
    const char* prefix;
    const char* folder;
    bool train;
  };
  const Part parts[] = {{"train", "train", true}, {"t10k", "val", false}};
  OutputFolder out(options);
  std::vector<Row> rows;
  for (const Part& part : parts) {
    const fs::path images_path = find_idx(options.src, std::string(part.prefix) + "-images-idx3-ubyte");
    const fs::path labels_path = find_idx(options.src, std::string(part.prefix) + "-labels-idx1-ubyte");
    const IdxImages images = read_images(images_path);
    const std::vector<int64_t> labels = read_labels(labels_path);
    OML_CHECK(static_cast<int64_t>(labels.size()) == images.count, DataError, images_path.string(), " holds ",
              images.count, " images but ", labels_path.string(), " holds ", labels.size(), " labels");
    const int64_t count = options.limit >= 0 ? std::min(options.limit, images.count) : images.count;
    fs::create_directories(out.staging() / "images" / part.folder);
    std::vector<std::string> paths(count);
    for (int64_t i = 0; i < count; ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "%05lld.png", static_cast<long long>(i));
      paths[i] = std::string("images/") + part.folder + "/" + name;
    }
    parallel_for(
        count, options.num_threads,
        [&](int64_t i) {
          const auto pixels = torch::from_blob(const_cast<uint8_t*>(images.image(i)),
                                               {images.rows, images.cols}, torch::kUInt8);
          const std::string png = encode_image(pixels, paths[i]);
          std::ofstream file(out.staging() / paths[i], std::ios::binary);
          file.write(png.data(), static_cast<std::streamsize>(png.size()));
          OML_CHECK(file.good(), RuntimeError, "cannot write ", (out.staging() / paths[i]).string());
        },
        options.on_progress);
    for (int64_t i = 0; i < count; ++i) {
      Row row;
      row.label = labels[i];
      row.path = paths[i];
      row.train = part.train;
      row.is_query = row.is_gallery = !part.train;
      rows.push_back(std::move(row));
    }
  }
  apply_limit(rows, options.limit);
  return out.commit(rows);
}

}  // namespace oml::data::convert
