#pragma once
// Internal: where a .npy file keeps its array, for reading it (npy.cpp) or mapping it
// (mapped_file.cpp).

#include <cstdint>
#include <filesystem>
#include <vector>

#include <ATen/core/Tensor.h>

namespace oml::io {

struct NpyLayout {
  at::ScalarType type;
  std::vector<int64_t> shape;
  int64_t data_offset;  ///< bytes from the file's start
  int64_t data_size;    ///< bytes of data (exactly what the shape needs)
};

/// Parses and checks the header against the file's size (DataError naming the file).
NpyLayout read_npy_layout(const std::filesystem::path& path);

/// DataError unless `tensor` is a float32/float64 [N, D] matrix (what embeddings are).
void check_embedding_matrix(const std::filesystem::path& path, const at::Tensor& tensor);

}  // namespace oml::io
