#pragma once
// Hugging Face's safetensors files (`model.safetensors`), read and written without Python.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON — one entry per tensor,
// `{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}`, plus an
// optional `"__metadata__"` object of strings — padded with spaces, then the tensors' bytes
// (little-endian, C order), offsets counted from the end of the header. The safetensors package
// requires the tensors to tile the data exactly (no gap, no overlap, nothing after the last one);
// so does this reader.

#include <filesystem>
#include <map>
#include <string>

#include "oml/io/state_dict.h"

namespace oml::io {

struct SafetensorsContent {
  StateDict tensors;                            ///< CPU tensors in the file's dtypes
  std::map<std::string, std::string> metadata;  ///< `__metadata__` (transformers writes {"format": "pt"})
};

/// Reads every tensor of a safetensors file. Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
/// DataError naming the file (and the tensor, where one is at fault) for anything the format does
/// not allow: a file shorter than its header, a header that is not a JSON object of well-formed
/// entries (a duplicate name, an unknown or unsupported dtype, a negative or non-integer
/// dimension, offsets that do not match the shape's byte size or do not tile the data), a
/// truncated or over-long data section.
SafetensorsContent read_safetensors(const std::filesystem::path& path);

/// Writes `tensors` (any device, any layout: stored contiguous from the CPU) and `metadata`
/// atomically, header padded to 8 bytes as the safetensors package does, tensors in name order.
/// UsageError naming the tensor for a dtype the format cannot hold here (complex, quantised, ...).
void write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace oml::io
