#include "oml/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "npy_layout.h"
#include "oml/common/error.h"
#include "oml/io/npy.h"

namespace oml::io {

namespace {

// The live mappings made here, by base address, so that release_mapped_rows() never advises
// memory it does not own (DONTNEED on an anonymous allocation would zero it), and gather_rows()
// can read a mapping's rows from its file. The file stays open as long as its mapping.
struct Mapping {
  std::size_t length = 0;  // of the mapping, which starts at offset 0 of the file
  int fd = -1;
  std::shared_ptr<const std::string> path;  // for errors
};

struct MappingTable {
  std::mutex mutex;
  std::map<std::uintptr_t, Mapping> mappings;
};

MappingTable& table() {
  static MappingTable instance;
  return instance;
}

// The mapping holding [lo, hi), as (base, mapping); nullptr when none does. Caller holds the lock.
std::pair<std::uintptr_t, const Mapping*> mapping_of(MappingTable& t, std::uintptr_t lo, std::uintptr_t hi) {
  auto it = t.mappings.upper_bound(lo);
  if (it == t.mappings.begin()) return {0, nullptr};
  --it;
  if (hi > it->first + it->second.length) return {0, nullptr};
  return {it->first, &it->second};
}

// Reads `size` bytes at `offset` of an open file, through short reads and signals.
void read_fully(int fd, const std::string& path, char* out, std::size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t got = ::pread(fd, out, size, offset);
    if (got < 0 && errno == EINTR) continue;
    OML_CHECK(got > 0, DataError, path, ": cannot read the memory-mapped .npy file at byte ", offset, ": ",
              got < 0 ? std::strerror(errno) : "unexpected end of file");
    out += got;
    size -= static_cast<std::size_t>(got);
    offset += got;
  }
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
  if (base == MAP_FAILED) ::close(fd);
  OML_CHECK(base != MAP_FAILED, DataError, path.string(),
            ": cannot memory-map the .npy file: ", std::strerror(mmap_errno));
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  {
    std::lock_guard<std::mutex> lock(table().mutex);
    table().mappings[address] = Mapping{length, fd, std::make_shared<const std::string>(path.string())};
  }
  auto* data = static_cast<char*>(base) + layout.data_offset;
  return at::from_blob(
      data, layout.shape,
      [address, length, fd](void*) {
        {
          std::lock_guard<std::mutex> lock(table().mutex);
          table().mappings.erase(address);
        }
        ::munmap(reinterpret_cast<void*>(address), length);
        ::close(fd);
      },
      at::TensorOptions().dtype(at::kFloat));
}

bool is_mapped(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.numel() == 0) return false;
  const auto lo = reinterpret_cast<std::uintptr_t>(tensor.data_ptr());
  std::lock_guard<std::mutex> lock(table().mutex);
  return mapping_of(table(), lo, lo + 1).second != nullptr;
}

void release_mapped_rows(const at::Tensor& rows, int64_t begin, int64_t end) {
  if (!rows.defined() || rows.dim() != 2 || end <= begin || !rows.is_contiguous()) return;
  const auto row_bytes = static_cast<std::uintptr_t>(rows.size(1) * rows.element_size());
  const auto first = reinterpret_cast<std::uintptr_t>(rows.data_ptr());
  const std::uintptr_t lo = first + static_cast<std::uintptr_t>(begin) * row_bytes;
  const std::uintptr_t hi = first + static_cast<std::uintptr_t>(end) * row_bytes;
  std::lock_guard<std::mutex> lock(table().mutex);
  if (mapping_of(table(), lo, hi).second == nullptr) return;
  // Whole pages inside the rows only: a page shared with rows outside stays.
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t from = (lo + page - 1) / page * page;
  const std::uintptr_t to = hi / page * page;
  if (from < to) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void gather_rows(const at::Tensor& rows, const int64_t* indices, std::size_t count, float* out) {
  OML_CHECK(rows.dim() == 2 && rows.scalar_type() == at::kFloat && rows.is_contiguous(), InternalError,
            "gather_rows needs a contiguous float32 matrix");
  const int64_t dim = rows.size(1);
  const auto row_bytes = static_cast<std::size_t>(dim) * sizeof(float);
  const float* data = rows.data_ptr<float>();
  if (count == 0 || dim == 0) return;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  Mapping mapping;
  std::uintptr_t base = 0;
  {
    std::lock_guard<std::mutex> lock(table().mutex);
    const auto found =
        mapping_of(table(), first, first + static_cast<std::uintptr_t>(rows.size(0)) * row_bytes);
    if (found.second != nullptr) {
      base = found.first;
      mapping = *found.second;
    }
  }
  for (std::size_t i = 0; i < count; ++i) {
    const int64_t row = indices[i];
    float* dst = out + i * static_cast<std::size_t>(dim);
    if (mapping.fd < 0) {
      std::copy_n(data + row * dim, dim, dst);
      continue;
    }
    // The caller holds `rows`, so the mapping (and its file) outlive this read.
    const auto offset = static_cast<off_t>(first - base + static_cast<std::uintptr_t>(row) * row_bytes);
    read_fully(mapping.fd, *mapping.path, reinterpret_cast<char*>(dst), row_bytes, offset);
  }
}

}  // namespace oml::io
