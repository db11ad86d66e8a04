#include "oml/io/npy.h"

#include <cstdio>

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "npy_layout.h"
#include "oml/common/error.h"
#include "oml/io/atomic_file.h"

namespace oml::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

struct DtypeInfo {
  const char* descr;
  at::ScalarType type;
};
constexpr DtypeInfo kDtypes[] = {
    {"<f4", at::kFloat}, {"<f8", at::kDouble}, {"<i4", at::kInt}, {"<i8", at::kLong}};

[[noreturn]] void bad_file(const std::filesystem::path& path, const std::string& what) {
  throw DataError(path.string() + ": not a readable .npy file: " + what);
}

// The value text after `'key':` in the header dict, up to the next top-level comma or brace.
std::string header_value(const std::filesystem::path& path, const std::string& header,
                         const std::string& key) {
  const std::string quoted = "'" + key + "'";
  auto at = header.find(quoted);
  if (at == std::string::npos) bad_file(path, "the header has no " + quoted + " entry: " + header);
  at = header.find(':', at + quoted.size());
  if (at == std::string::npos) bad_file(path, "malformed header: " + header);
  ++at;
  while (at < header.size() && std::isspace(static_cast<unsigned char>(header[at]))) ++at;
  std::size_t end = at;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    if (depth < 0) break;
  }
  if (end < header.size() && header[end] == ')') ++end;
  std::string value = header.substr(at, end - at);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  return value;
}

std::vector<int64_t> parse_shape(const std::filesystem::path& path, const std::string& text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') bad_file(path, "malformed shape " + text);
  std::vector<int64_t> shape;
  std::stringstream items(text.substr(1, text.size() - 2));
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;  // trailing comma of "(5,)"
    const auto last = item.find_last_not_of(" \tL");
    const std::string digits = item.substr(first, last - first + 1);
    // 18 digits keep every dimension (and stoll) well inside int64.
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
      bad_file(path, "malformed shape " + text);
    }
    shape.push_back(std::stoll(digits));
  }
  return shape;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  return text + ")";
}

}  // namespace

NpyLayout read_npy_layout(const std::filesystem::path& path) {
  // Not through a FIFO (the open would wait for a writer) or a device.
  std::error_code ec;
  OML_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec), DataError,
            path.string(), ": not a regular file (a folder, device or pipe); expected a .npy file");
  std::ifstream in(path, std::ios::binary);
  OML_CHECK(in.good(), DataError, path.string(), ": cannot open the .npy file");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  char preamble[10] = {};
  in.read(preamble, 8);
  if (in.gcount() < 8 || std::memcmp(preamble, kMagic, kMagicSize) != 0) {
    bad_file(path, "it does not start with the NumPy magic string");
  }
  const int major = static_cast<unsigned char>(preamble[6]);
  int64_t header_size = 0;
  int64_t prefix = 0;
  if (major == 1) {
    unsigned char bytes[2];
    in.read(reinterpret_cast<char*>(bytes), 2);
    header_size = bytes[0] | (bytes[1] << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    unsigned char bytes[4];
    in.read(reinterpret_cast<char*>(bytes), 4);
    header_size = static_cast<int64_t>(bytes[0]) | (static_cast<int64_t>(bytes[1]) << 8) |
                  (static_cast<int64_t>(bytes[2]) << 16) | (static_cast<int64_t>(bytes[3]) << 24);
    prefix = 12;
  } else {
    bad_file(path, "unsupported format version " + std::to_string(major));
  }
  if (!in || prefix + header_size > file_size) bad_file(path, "the header is truncated");
  std::string header(static_cast<std::size_t>(header_size), '\0');
  in.read(header.data(), header_size);

  const std::string descr = header_value(path, header, "descr");
  const std::string fortran = header_value(path, header, "fortran_order");
  const std::vector<int64_t> shape = parse_shape(path, header_value(path, header, "shape"));
  if (fortran != "False") {
    bad_file(path, "it is stored in Fortran order; save a C-ordered array (np.ascontiguousarray)");
  }
  at::ScalarType type = at::kFloat;
  bool known = false;
  for (const auto& dtype : kDtypes) {
    if (descr == std::string("'") + dtype.descr + "'") {
      type = dtype.type;
      known = true;
    }
  }
  if (!known) {
    bad_file(path, "dtype " + descr +
                       " is not supported (expected little-endian float32 '<f4', float64 '<f8', "
                       "int32 '<i4' or int64 '<i8')");
  }

  // The header is checked against the file's size before anything is allocated: a header that
  // claims (10^12, 10) must be a clear error, not an allocation failure.
  const int64_t available = file_size - prefix - header_size;
  // The strides multiply every dimension but the first, even when another one is 0: a shape
  // such as (0, 10^18, 10^18) holds no data and still cannot be a tensor.
  long double extent = static_cast<long double>(c10::elementSize(type));
  for (int64_t d : shape) extent *= static_cast<long double>(std::max<int64_t>(d, 1));
  if (extent > static_cast<long double>(std::numeric_limits<int64_t>::max())) {
    bad_file(path, "shape " + shape_text(shape) + " is too large for any array");
  }
  long double needed = static_cast<long double>(c10::elementSize(type));
  for (int64_t d : shape) needed *= static_cast<long double>(d);
  if (needed > static_cast<long double>(available)) {
    char bytes[64];
    std::snprintf(bytes, sizeof(bytes), "%.0Lf", needed);
    throw DataError(path.string() + ": truncated .npy file: shape " + shape_text(shape) + " needs " + bytes +
                    " bytes of data, the file has " + std::to_string(available));
  }
  const auto data_size = static_cast<int64_t>(needed);
  OML_CHECK(available == data_size, DataError, path.string(), ": .npy file has ", available - data_size,
            " bytes after the ", data_size, " bytes of data that shape ", shape_text(shape), " needs");
  return NpyLayout{type, shape, prefix + header_size, data_size};
}

at::Tensor read_npy(const std::filesystem::path& path) {
  const NpyLayout layout = read_npy_layout(path);
  std::ifstream in(path, std::ios::binary);
  OML_CHECK(in.good(), DataError, path.string(), ": cannot open the .npy file");
  in.seekg(layout.data_offset);
  at::Tensor tensor = at::empty(layout.shape, at::TensorOptions().dtype(layout.type));
  const int64_t data_size = layout.data_size;
  in.read(static_cast<char*>(tensor.data_ptr()), data_size);
  OML_CHECK(in.gcount() == data_size, DataError, path.string(), ": could not read the .npy data");
  return tensor;
}

void check_embedding_matrix(const std::filesystem::path& path, const at::Tensor& tensor) {
  OML_CHECK(tensor.dim() == 2, DataError, path.string(), ": expected a [N, D] embedding matrix, found ",
            tensor.dim(), " dimension(s) with shape ", tensor.sizes());
  OML_CHECK(tensor.scalar_type() == at::kFloat || tensor.scalar_type() == at::kDouble, DataError,
            path.string(), ": expected float32 or float64 embeddings, found ", tensor.scalar_type());
}

at::Tensor read_npy_matrix(const std::filesystem::path& path) {
  at::Tensor tensor = read_npy(path);
  check_embedding_matrix(path, tensor);
  return tensor.to(at::kFloat);
}

void write_npy(const std::filesystem::path& path, const at::Tensor& tensor) {
  const char* descr = nullptr;
  for (const auto& dtype : kDtypes) {
    if (dtype.type == tensor.scalar_type()) descr = dtype.descr;
  }
  OML_CHECK(descr != nullptr, UsageError, "write_npy(", path.string(), "): unsupported dtype ",
            tensor.scalar_type(), " (float32, float64, int32, int64 are)");
  const at::Tensor data = tensor.to(at::kCPU).contiguous();
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape_text(data.sizes().vec()) + ", }";
  // Version 1.0 pads magic + length + header + '\n' to a multiple of 64 bytes.
  const std::size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  OML_CHECK(header.size() < 65536, UsageError, "write_npy(", path.string(),
            "): shape too long for a .npy header");
  write_stream_atomic(path, [&](std::ostream& out) {
    out.write(kMagic, kMagicSize);
    const char version[2] = {1, 0};
    out.write(version, 2);
    const unsigned char length[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                     static_cast<unsigned char>(header.size() >> 8)};
    out.write(reinterpret_cast<const char*>(length), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(data.data_ptr()), static_cast<std::streamsize>(data.nbytes()));
  });
}

}  // namespace oml::io
