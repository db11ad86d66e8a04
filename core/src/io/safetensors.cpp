#include "oml/io/safetensors.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <fstream>
#include <set>
#include <vector>

#include "oml/common/error.h"
#include "oml/io/atomic_file.h"

namespace oml::io {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and read as it lies in the file");

// The safetensors package refuses headers over 100 MB; a larger length is a damaged file.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kMaxHeaderNesting = 16;

struct Dtype {
  const char* code;
  at::ScalarType type;
};
constexpr Dtype kSafetensorsDtypes[] = {{"F64", at::kDouble},    {"F32", at::kFloat}, {"F16", at::kHalf},
                                        {"BF16", at::kBFloat16}, {"I64", at::kLong},  {"I32", at::kInt},
                                        {"I16", at::kShort},     {"I8", at::kChar},   {"U8", at::kByte},
                                        {"BOOL", at::kBool}};
// Codes of the format that have no tensor type on every LibTorch oml-cpp builds against.
const std::set<std::string> kUnsupportedCodes = {"U16",     "U32", "U64",     "F8_E4M3", "F8_E5M2",
                                                 "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

[[noreturn]] void bad_safetensors(const fs::path& path, const std::string& what) {
  throw DataError(path.string() + ": not a valid safetensors file: " + what);
}

[[noreturn]] void bad_tensor(const fs::path& path, const std::string& name, const std::string& what) {
  throw DataError(path.string() + ": tensor '" + name + "': " + what);
}

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

// The header parsed, with the first duplicate key of any object reported (JSON allows them,
// nlohmann keeps the last one silently; the safetensors package refuses them).
json parse_header(const fs::path& path, const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t track = [&](int depth, json::parse_event_t event, json& parsed) {
    // A header nests three deep ({name: {shape: [..]}}); printing a value nested 100,000 deep
    // in a message would overflow the stack.
    if (depth > kMaxHeaderNesting) {
      bad_safetensors(path, "the header nests deeper than " + std::to_string(kMaxHeaderNesting) + " levels");
    }
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty() && duplicate.empty()) {
      const auto key = parsed.get<std::string>();
      if (!open_objects.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, track);
  } catch (const json::exception& e) {
    bad_safetensors(path, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) bad_safetensors(path, "the header has the key '" + duplicate + "' twice");
  if (!header.is_object()) bad_safetensors(path, "the header is not a JSON object");
  return header;
}

std::uint64_t unsigned_value(const fs::path& path, const std::string& name, const json& value,
                             const std::string& what) {
  if (!value.is_number_unsigned()) {
    bad_tensor(path, name, what + " must be a non-negative integer, got " + value.dump());
  }
  return value.get<std::uint64_t>();
}

Entry parse_entry(const fs::path& path, const std::string& name, const json& info) {
  if (!info.is_object())
    bad_tensor(path, name, "expected an object with dtype, shape, data_offsets, got " + info.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(key)) bad_tensor(path, name, std::string("the entry has no '") + key + "'");
  }
  Entry entry;
  entry.name = name;
  const auto& dtype = info.at("dtype");
  if (!dtype.is_string()) bad_tensor(path, name, "dtype must be a string, got " + dtype.dump());
  const auto code = dtype.get<std::string>();
  const auto known = std::find_if(std::begin(kSafetensorsDtypes), std::end(kSafetensorsDtypes),
                                  [&](const Dtype& d) { return code == d.code; });
  if (known == std::end(kSafetensorsDtypes)) {
    bad_tensor(path, name,
               kUnsupportedCodes.count(code)
                   ? "dtype " + code + " is not supported (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL are)"
                   : "unknown dtype '" + code + "'");
  }
  entry.type = known->type;

  const auto& shape = info.at("shape");
  if (!shape.is_array()) bad_tensor(path, name, "shape must be an array, got " + shape.dump());
  std::uint64_t numel = 1, nonzero = 1;  // an empty tensor's other sizes still must fit ATen's int64
  for (const auto& dim : shape) {
    const std::uint64_t size = unsigned_value(path, name, dim, "every dimension of shape");
    if (size > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, size, &numel) ||
        __builtin_mul_overflow(nonzero, std::max<std::uint64_t>(size, 1), &nonzero) ||
        nonzero > static_cast<std::uint64_t>(INT64_MAX)) {
      bad_tensor(path, name, "shape " + shape.dump() + " is too large");
    }
    entry.shape.push_back(static_cast<int64_t>(size));
  }
  const auto& offsets = info.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    bad_tensor(path, name, "data_offsets must be [begin, end], got " + offsets.dump());
  }
  entry.begin = unsigned_value(path, name, offsets[0], "data_offsets' begin");
  entry.end = unsigned_value(path, name, offsets[1], "data_offsets' end");
  if (entry.end < entry.begin)
    bad_tensor(path, name, "data_offsets " + offsets.dump() + " end before they begin");
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(c10::elementSize(entry.type)), &bytes) ||
      bytes != entry.end - entry.begin) {
    bad_tensor(path, name,
               "data_offsets " + offsets.dump() + " hold " + std::to_string(entry.end - entry.begin) +
                   " bytes, but " + code + " " + shape.dump() + " takes " + std::to_string(numel) + " x " +
                   std::to_string(c10::elementSize(entry.type)));
  }
  return entry;
}

std::map<std::string, std::string> parse_metadata(const fs::path& path, const json& value) {
  if (!value.is_object())
    bad_safetensors(path, "__metadata__ must be an object of strings, got " + value.dump());
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      bad_safetensors(path, "__metadata__['" + key + "'] must be a string, got " + item.dump());
    out.emplace(key, item.get<std::string>());
  }
  return out;
}

// The tensors must cover [0, data_bytes) one after the other, as the safetensors package checks.
void check_tiling(const fs::path& path, std::vector<Entry>& entries, std::uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.begin != expected) {
      bad_tensor(path, e.name,
                 "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] " +
                     (e.begin < expected ? "overlap the previous tensor's"
                                         : "leave a gap after the previous tensor's") +
                     " (which end at " + std::to_string(expected) + ")");
    }
    expected = e.end;
  }
  if (expected > data_bytes) {
    bad_safetensors(path, "truncated: the tensors need " + std::to_string(expected) +
                              " bytes of data, the file has " + std::to_string(data_bytes));
  }
  if (expected < data_bytes) {
    bad_safetensors(path, std::to_string(data_bytes - expected) +
                              " bytes after the last tensor's data (the header accounts for " +
                              std::to_string(expected) + " of " + std::to_string(data_bytes) + ")");
  }
}

const char* dtype_code(at::ScalarType type) {
  for (const auto& d : kSafetensorsDtypes) {
    if (d.type == type) return d.code;
  }
  return nullptr;
}

}  // namespace

SafetensorsContent read_safetensors(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot open the safetensors file");
  std::error_code ec;
  const std::uint64_t file_bytes = fs::file_size(path, ec);
  if (ec) throw DataError(path.string() + ": cannot read the safetensors file's size: " + ec.message());
  if (file_bytes < 8) {
    bad_safetensors(path, std::to_string(file_bytes) + " bytes, less than the 8-byte header length");
  }
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | length_bytes[i];
  if (header_bytes > file_bytes - 8) {
    bad_safetensors(path, "truncated: the header is " + std::to_string(header_bytes) +
                              " bytes long, the file has " + std::to_string(file_bytes - 8) +
                              " after the length");
  }
  if (header_bytes > kMaxHeaderBytes) {
    bad_safetensors(path, "a header of " + std::to_string(header_bytes) + " bytes (at most " +
                              std::to_string(kMaxHeaderBytes) + " are allowed)");
  }
  std::string text(header_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  if (!in) throw DataError(path.string() + ": cannot read the safetensors header");
  if (text.empty() || text.front() != '{') bad_safetensors(path, "the header does not start with '{'");
  const json header = parse_header(path, text);

  SafetensorsContent content;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      content.metadata = parse_metadata(path, info);
    } else {
      entries.push_back(parse_entry(path, name, info));
    }
  }
  const std::uint64_t data_start = 8 + header_bytes;
  check_tiling(path, entries, file_bytes - data_start);

  for (const auto& e : entries) {
    auto tensor = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) bad_tensor(path, e.name, "cannot read its " + std::to_string(e.end - e.begin) + " bytes");
    content.tensors.emplace(e.name, std::move(tensor));
  }
  return content;
}

void write_safetensors(const fs::path& path, const StateDict& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    OML_CHECK(name != "__metadata__", UsageError, path.string(), ": a tensor cannot be named __metadata__");
    const char* code = dtype_code(tensor.scalar_type());
    OML_CHECK(code != nullptr, UsageError, path.string(), ": tensor '", name, "' has dtype ",
              tensor.scalar_type(),
              ", which safetensors files here do not hold (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
    auto stored = tensor.detach().to(at::kCPU).contiguous();
    const std::uint64_t bytes = static_cast<std::uint64_t>(stored.numel()) * stored.element_size();
    header[name] = {
        {"dtype", code}, {"shape", stored.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(stored));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  write_stream_atomic(path, [&](std::ostream& out) {
    unsigned char length_bytes[8];
    std::uint64_t n = text.size();
    for (auto& byte : length_bytes) {
      byte = static_cast<unsigned char>(n & 0xff);
      n >>= 8;
    }
    out.write(reinterpret_cast<const char*>(length_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : data) {
      out.write(static_cast<const char*>(t.data_ptr()),
                static_cast<std::streamsize>(t.numel() * t.element_size()));
    }
  });
}

}  // namespace oml::io
