#include "receive_buffer.h"

#include <torch/torch.h>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace oml::distributed::detail {

at::Tensor empty_receive_buffer(const std::vector<int64_t>& shape, const at::TensorOptions& options) {
#ifdef __linux__
  constexpr std::size_t kHugePage = std::size_t{1} << 21;
  constexpr std::size_t kMinBytes = std::size_t{16} << 20;
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  const std::size_t bytes = static_cast<std::size_t>(numel) * options.dtype().itemsize();
  if (options.device().is_cpu() && bytes >= kMinBytes) {
    const std::size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) {
      madvise(memory, size, MADV_HUGEPAGE);  // advice only: fine if THP is off
      return torch::from_blob(
          memory, shape, [size](void* p) { munmap(p, size); }, options);
    }
  }
#endif
  return torch::empty(shape, options);
}

}  // namespace oml::distributed::detail
