#include "oml/optim/resume.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <sstream>

#include "oml/common/error.h"
#include "oml/io/torch_file.h"
#include "oml/optim/multi_tensor.h"

namespace oml::optim {

at::Tensor save_optimizer_state(torch::optim::Optimizer& optimizer) {
  if (auto* skipping = dynamic_cast<DeviceSkipping*>(&optimizer)) skipping->settle_step_counts();
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  const std::string bytes = out.str();
  auto tensor = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
  return tensor;
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const at::Tensor& bytes) {
  OML_CHECK(bytes.scalar_type() == torch::kUInt8 && bytes.dim() == 1, DataError,
            "optimizer state: expected a 1-D uint8 tensor, got ", bytes.scalar_type(), " ", bytes.sizes());
  // A view of a few bytes can claim gigabytes (stride 0): contiguous() would allocate them.
  OML_CHECK(bytes.is_contiguous(), DataError, "optimizer state: expected the bytes of an archive, got a ",
            bytes.sizes(), " view with strides ", bytes.strides());
  const auto* data = static_cast<const char*>(bytes.data_ptr());
  const auto size = static_cast<std::size_t>(bytes.numel());
  // The state is a zip archive that LibTorch's TorchScript loader trusts: damaged code in it has
  // crashed its parser (a segfault), and its unpickler frees values nested 100,000 deep by
  // recursion (another). The checkpoint's own CRC covers these bytes as a whole; this also checks
  // each record of the archive, and reads its pickles with read_torch_file's limits, before
  // LibTorch reads it.
  io::check_torch_archive("optimizer state", data, size);
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(data, size);
    optimizer.load(archive);
  } catch (const c10::Error& e) {
    throw DataError(std::string("optimizer state does not fit this optimizer (another optimizer or other ") +
                    "parameters?): " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    // The state is a small TorchScript archive, whose reader reports damaged code as plain
    // std::exceptions (torch::jit::ErrorReport) spanning several lines.
    const std::string what = e.what();
    throw DataError("optimizer state is damaged and cannot be read: " + what.substr(0, what.find('\n')));
  }
}

at::Tensor save_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void load_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const c10::Error& e) {
    throw DataError(std::string("random generator state is invalid: ") + e.what_without_backtrace());
  }
}

}  // namespace oml::optim
