#include "oml/optim/resume.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <sstream>

#include "oml/common/error.h"
#include "oml/io/torch_file.h"
#include "oml/optim/formula_optimizers.h"
#include "oml/optim/multi_tensor.h"
#include "torch_compat.h"

namespace oml::optim {

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Adam's and AdamW's state (two classes with the same fields).
template <class State>
NamedTensors adam_tensors(const State& s) {
  return {{"exp_avg", s.exp_avg()}, {"exp_avg_sq", s.exp_avg_sq()}, {"max_exp_avg_sq", s.max_exp_avg_sq()}};
}

// The state tensors of one parameter by name (undefined ones included: unused options).
NamedTensors state_tensors(torch::optim::OptimizerParamState& state) {
  using namespace torch::optim;
  if (auto* s = dynamic_cast<AdamParamState*>(&state)) return adam_tensors(*s);
  if (auto* s = dynamic_cast<AdamWParamState*>(&state)) return adam_tensors(*s);
  if (auto* s = dynamic_cast<SGDParamState*>(&state)) return {{"momentum_buffer", s->momentum_buffer()}};
  if (auto* s = dynamic_cast<RMSpropParamState*>(&state)) {
    return {{"square_avg", s->square_avg()},
            {"momentum_buffer", s->momentum_buffer()},
            {"grad_avg", s->grad_avg()}};
  }
  if (auto* s = dynamic_cast<AdagradParamState*>(&state)) return {{"sum", s->sum()}};
  if (auto* s = dynamic_cast<NamedState*>(&state)) return {s->tensors.begin(), s->tensors.end()};
  return {};
}

// The per-parameter scalars of torch.optim's rules (ASGD's eta and mu, NAdam's mu_product); every
// other state tensor has its parameter's shape.
bool is_scalar_state(const std::string& name) {
  return name == "eta" || name == "mu" || name == "mu_product";
}

// LibTorch's load takes the state tensors as they are: state of other shapes (another model with
// as many parameters) failed only at the first step, "The size of tensor a (6) must match ...".
void check_state_shapes(torch::optim::Optimizer& optimizer) {
  auto& states = optimizer.state();
  std::size_t group_index = 0;
  for (auto& group : optimizer.param_groups()) {
    std::size_t param_index = 0;
    for (const auto& param : group.params()) {
      const auto found = states.find(torch_compat::optimizer_state_key(param));
      if (found != states.end() && found->second) {
        for (const auto& [name, tensor] : state_tensors(*found->second)) {
          if (!tensor.defined()) continue;
          const bool fits = is_scalar_state(name) ? tensor.numel() == 1 : tensor.sizes() == param.sizes();
          OML_CHECK(fits, DataError, "optimizer state does not fit these parameters (another model?): group ",
                    group_index, ", parameter ", param_index, " of shape ", param.sizes(), " has ", name,
                    " of shape ", tensor.sizes());
        }
      }
      ++param_index;
    }
    ++group_index;
  }
}

}  // namespace

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
  check_state_shapes(optimizer);
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
