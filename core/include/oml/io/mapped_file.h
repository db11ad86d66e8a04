#pragma once
// Read-only memory-mapped tensors, for embedding files larger than memory
// (docs/metrics.md#galleries-larger-than-memory).
//
//   at::Tensor g = io::map_npy_matrix("gallery.npy");   // float32 [N, D], nothing read yet
//   for (int64_t r = 0; r < n; r += chunk) {
//     use(g.narrow(0, r, std::min(chunk, n - r)));
//     io::release_mapped_rows(g, r, std::min(n, r + chunk));  // out of this process's RSS again
//   }
//
// The pages a mapped tensor touches count towards the process's resident set until released;
// release_mapped_rows() drops them (madvise DONTNEED on a read-only file mapping: the kernel
// reads them again from the page cache or the file if they are touched later). It is a no-op for
// any tensor that is not (a view of) a mapping made here, so generic code may call it on every
// tensor it streams through.
//
// Scattered rows (a training sample, re-ranking candidates) are read with gather_rows() instead
// of through the mapping: a page fault maps the whole page-cache folio around the faulting
// address (up to 2 MB on current kernels, whatever madvise says), so touching a few thousand
// random rows would make most of a cached file resident until the next release.

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include <ATen/core/Tensor.h>

namespace oml::io {

/// Maps a .npy file of float32 [N, D] (little-endian, C order) read-only; the tensor keeps the
/// mapping alive (views included). Other dtypes (float64) are read and converted instead, as
/// read_npy_matrix does. DataError as read_npy_matrix for a malformed or truncated file.
at::Tensor map_npy_matrix(const std::filesystem::path& path);

/// Whether `tensor`'s data lies in a mapping made by map_npy_matrix.
bool is_mapped(const at::Tensor& tensor);

/// Drops the resident pages of rows [begin, end) of a contiguous [N, D] tensor from the process
/// when they lie in such a mapping (whole pages inside the rows only); otherwise nothing.
void release_mapped_rows(const at::Tensor& rows, int64_t begin, int64_t end);

/// Copies rows indices[0..count) of a contiguous float32 [N, D] tensor into `out` (count x D
/// floats, in that order). Rows of a mapping made by map_npy_matrix are read from its file
/// (pread, through the page cache) and never become resident in this process; any other tensor
/// is copied from memory. DataError if the file cannot be read; indices must be in [0, N).
void gather_rows(const at::Tensor& rows, const int64_t* indices, std::size_t count, float* out);

}  // namespace oml::io
