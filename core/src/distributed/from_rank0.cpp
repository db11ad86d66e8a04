#include "oml/distributed/from_rank0.h"

#include <torch/torch.h>

#include <cstring>
#include <vector>

#include "oml/distributed/process_group.h"

namespace oml::distributed {

namespace {

// Rank 0's `tensor` (a CPU tensor, of the same shape and dtype on every rank) on every rank, on the CPU.
at::Tensor broadcast_cpu(ProcessGroup& group, const c10::Device& device, const at::Tensor& tensor) {
  at::Tensor on_device = tensor.to(device).contiguous();
  group.broadcast(on_device, 0);
  return on_device.to(torch::kCPU).contiguous();
}

}  // namespace

bool decision_from_rank0(ProcessGroup& group, const c10::Device& device, bool decision) {
  if (group.size() == 1) return decision;
  const at::Tensor flag = torch::full({1}, decision ? 1 : 0, torch::kUInt8);
  return broadcast_cpu(group, device, flag).item<uint8_t>() != 0;
}

std::map<std::string, double> values_from_rank0(ProcessGroup& group, const c10::Device& device,
                                                const std::map<std::string, double>& values) {
  if (group.size() == 1) return values;
  const bool root = group.rank() == 0;
  // 1. How many values.
  const at::Tensor count = broadcast_cpu(
      group, device, torch::full({1}, root ? static_cast<int64_t>(values.size()) : 0, torch::kLong));
  const int64_t n = count.item<int64_t>();
  if (n == 0) return {};
  // 2. Each name's length, 3. the names' bytes, 4. the values, all in rank 0's (the map's) order.
  at::Tensor lengths = torch::zeros({n}, torch::kLong);
  at::Tensor numbers = torch::zeros({n}, torch::kDouble);
  std::string bytes;
  if (root) {
    auto* length = lengths.data_ptr<int64_t>();
    auto* number = numbers.data_ptr<double>();
    for (const auto& [name, value] : values) {
      *length++ = static_cast<int64_t>(name.size());
      *number++ = value;
      bytes += name;
    }
  }
  lengths = broadcast_cpu(group, device, lengths);
  const int64_t total = lengths.sum().item<int64_t>();
  if (total > 0) {
    at::Tensor packed = torch::empty({total}, torch::kUInt8);
    if (root) std::memcpy(packed.data_ptr(), bytes.data(), bytes.size());
    packed = broadcast_cpu(group, device, packed);
    bytes.assign(static_cast<const char*>(packed.data_ptr()), static_cast<std::size_t>(total));
  }
  numbers = broadcast_cpu(group, device, numbers);
  std::map<std::string, double> out;
  const auto* length = lengths.data_ptr<int64_t>();
  const auto* number = numbers.data_ptr<double>();
  std::size_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto size = static_cast<std::size_t>(length[i]);
    out.emplace(bytes.substr(offset, size), number[i]);
    offset += size;
  }
  return out;
}

}  // namespace oml::distributed
