#include "oml/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "npy_layout.h"
#include "oml/common/error.h"
#include "oml/io/npy.h"

namespace oml::io {

namespace {

// The live mappings made here (base address -> length), so that release_mapped_rows() never
// advises memory it does not own: DONTNEED on an anonymous allocation would zero it.
struct MappingTable {
  std::mutex mutex;
  std::map<std::uintptr_t, std::size_t> mappings;
};

MappingTable& table() {
  static MappingTable instance;
  return instance;
}

// The mapping holding [lo, hi), as (base, length); length 0 when none does. Caller holds the lock.
std::pair<std::uintptr_t, std::size_t> mapping_of(MappingTable& t, std::uintptr_t lo, std::uintptr_t hi) {
  auto it = t.mappings.upper_bound(lo);
  if (it == t.mappings.begin()) return {0, 0};
  --it;
  if (hi > it->first + it->second) return {0, 0};
  return *it;
}

}  // namespace

at::Tensor map_npy_matrix(const std::filesystem::path& path) {
  const NpyLayout layout = read_npy_layout(path);
  // Only float32 matrices are used in place; float64 needs a converted copy anyway, and an
  // empty or oddly aligned array is simply read.
  if (layout.type != at::kFloat || layout.shape.size() != 2 || layout.data_size == 0 ||
      layout.data_offset % static_cast<int64_t>(alignof(float)) != 0) {
    return read_npy_matrix(path);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  OML_CHECK(fd >= 0, DataError, path.string(), ": cannot open the .npy file: ", std::strerror(errno));
  const auto length = static_cast<std::size_t>(layout.data_offset + layout.data_size);
  // Read-only: nothing writes into embeddings, and a bug that did would fail loudly here
  // instead of silently losing its write at the next release.
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);
  OML_CHECK(base != MAP_FAILED, DataError, path.string(),
            ": cannot memory-map the .npy file: ", std::strerror(mmap_errno));
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  {
    std::lock_guard<std::mutex> lock(table().mutex);
    table().mappings[address] = length;
  }
  auto* data = static_cast<char*>(base) + layout.data_offset;
  return at::from_blob(
      data, layout.shape,
      [address, length](void*) {
        {
          std::lock_guard<std::mutex> lock(table().mutex);
          table().mappings.erase(address);
        }
        ::munmap(reinterpret_cast<void*>(address), length);
      },
      at::TensorOptions().dtype(at::kFloat));
}

bool is_mapped(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.numel() == 0) return false;
  const auto lo = reinterpret_cast<std::uintptr_t>(tensor.data_ptr());
  std::lock_guard<std::mutex> lock(table().mutex);
  return mapping_of(table(), lo, lo + 1).second > 0;
}

void release_mapped_rows(const at::Tensor& rows, int64_t begin, int64_t end) {
  if (!rows.defined() || rows.dim() != 2 || end <= begin || !rows.is_contiguous()) return;
  const auto row_bytes = static_cast<std::uintptr_t>(rows.size(1) * rows.element_size());
  const auto first = reinterpret_cast<std::uintptr_t>(rows.data_ptr());
  const std::uintptr_t lo = first + static_cast<std::uintptr_t>(begin) * row_bytes;
  const std::uintptr_t hi = first + static_cast<std::uintptr_t>(end) * row_bytes;
  std::lock_guard<std::mutex> lock(table().mutex);
  if (mapping_of(table(), lo, hi).second == 0) return;
  // Whole pages inside the rows only: a page shared with rows outside stays.
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t from = (lo + page - 1) / page * page;
  const std::uintptr_t to = hi / page * page;
  if (from < to) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

}  // namespace oml::io
