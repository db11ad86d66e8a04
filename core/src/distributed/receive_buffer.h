#pragma once
// The receive buffer of a gather (inside oml_core, not installed).

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace oml::distributed::detail {

/// An uninitialised tensor for a gather result. Large CPU ones are mapped with transparent huge
/// pages where the kernel offers them (madvise mode): filling 400 MB of fresh 4 KB pages costs
/// ~100,000 page faults, several times the transfer itself on loopback (docs/benchmarks.md).
at::Tensor empty_receive_buffer(const std::vector<int64_t>& shape, const at::TensorOptions& options);

}  // namespace oml::distributed::detail
