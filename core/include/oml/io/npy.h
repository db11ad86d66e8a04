#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0), little-endian, C order: how
// oml-predict hands embeddings to Python (np.load) and how oml-validate reads precomputed
// embeddings. Supported dtypes: float32 '<f4', float64 '<f8', int32 '<i4', int64 '<i8'.
//
//   io::write_npy("save/embeddings.npy", embeddings);   // float32 [N, D]
//   at::Tensor e = io::read_npy_matrix("save/embeddings.npy");

#include <filesystem>

#include <ATen/core/Tensor.h>

namespace oml::io {

/// Reads the array with its dtype and shape. Throws DataError naming the file for a bad magic
/// string, an unsupported or big-endian dtype, Fortran order, a malformed header, or a data
/// section shorter or longer than the shape says.
at::Tensor read_npy(const std::filesystem::path& path);

/// Reads a [N, D] embedding matrix as float32 (float64 files are converted). Any other dtype
/// or number of dimensions is a DataError that says what was found.
at::Tensor read_npy_matrix(const std::filesystem::path& path);

/// Writes `tensor` (float32, float64, int32 or int64; any shape) atomically. Throws UsageError
/// for other dtypes and RuntimeError when the file cannot be written.
void write_npy(const std::filesystem::path& path, const at::Tensor& tensor);

}  // namespace oml::io
