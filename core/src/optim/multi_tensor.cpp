// Adam, AdamW and SGD on ATen's multi-tensor kernels: torch/optim/adam.py's _multi_tensor_adam
// and _fused_adam, sgd.py's _multi_tensor_sgd and _fused_sgd (PyTorch 2.11), op for op, over
// LibTorch's optimizer classes and state (oml/optim/multi_tensor.h).
#include "oml/optim/multi_tensor.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "oml/common/error.h"
#include "torch_compat.h"

namespace oml::optim {

namespace {

using LossClosure = torch::optim::Optimizer::LossClosure;
using Tensors = std::vector<at::Tensor>;
using Positions = std::vector<std::size_t>;

void check_flags(const KernelFlags& flags, const char* name) {
  const std::string problem = kernel_flags_problem(flags);
  OML_CHECK(problem.empty(), UsageError, "optimizer '", name, "': ", problem);
}

// torch.optim's _get_foreach_kernels_supported_devices: cuda, xpu, mtia and the PrivateUse1
// backend (MTIA, unknown to LibTorch 1.13, is left out: oml-cpp runs on the CPU and CUDA).
bool has_foreach_kernels(const at::Tensor& t) {
  const auto type = t.device().type();
  return type == c10::DeviceType::CUDA || type == c10::DeviceType::XPU ||
         type == c10::DeviceType::PrivateUse1;
}

// torch.optim's _device_dtype_check_for_fused: floating-point parameters on a device with the
// fused kernels (of those LibTorch knows on both versions: cpu, cuda, xpu, mps, hpu, PrivateUse1).
void check_fused_parameter(const at::Tensor& p, const char* name) {
  const auto type = p.device().type();
  const bool device_ok = type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA ||
                         type == c10::DeviceType::XPU || type == c10::DeviceType::MPS ||
                         type == c10::DeviceType::HPU || type == c10::DeviceType::PrivateUse1;
  OML_CHECK(device_ok && p.is_floating_point(), UsageError, "optimizer '", name,
            "': fused: true needs floating-point parameters on the CPU or a GPU, got ", p.scalar_type(),
            " on ", p.device());
}

// The positions of `tensors` by device and dtype, in first-seen order (torch.optim's
// _group_tensors_by_device_and_dtype): a multi-tensor kernel takes tensors of one device and
// dtype.
std::vector<Positions> by_device_and_dtype(const Tensors& tensors) {
  std::vector<std::pair<std::pair<c10::Device, c10::ScalarType>, Positions>> buckets;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto key = std::make_pair(tensors[i].device(), tensors[i].scalar_type());
    auto found = std::find_if(buckets.begin(), buckets.end(), [&](const auto& b) { return b.first == key; });
    if (found == buckets.end()) {
      buckets.emplace_back(key, Positions{});
      found = buckets.end() - 1;
    }
    found->second.push_back(i);
  }
  std::vector<Positions> out;
  for (auto& bucket : buckets) out.push_back(std::move(bucket.second));
  return out;
}

Tensors pick(const Tensors& all, const Positions& positions) {
  Tensors out;
  out.reserve(positions.size());
  for (const std::size_t i : positions) out.push_back(all[i]);
  return out;
}

at::ArrayRef<at::Scalar> scalars(const std::vector<at::Scalar>& values) {
  return at::ArrayRef<at::Scalar>(values);
}

// LibTorch's own per-parameter step (`libtorch_step`: Adam::step, SGD::step) on the groups
// marked in `in_loop` only. The other groups' gradients are set aside meanwhile (LibTorch skips
// a parameter without one), and with `maximize` the gradients are negated around it — an exact
// operation, so this is torch.optim's `-grad` of _single_tensor_adam / _single_tensor_sgd.
void for_loop_step(torch::optim::Optimizer& self, const std::vector<bool>& in_loop, bool maximize,
                   const std::function<void()>& libtorch_step) {
  struct Restore {
    std::vector<std::pair<at::Tensor, at::Tensor>> aside;  // a parameter, its gradient
    Tensors negated;
    ~Restore() {
      for (const at::Tensor& grad : negated) grad.neg_();
      for (const auto& [param, grad] : aside) param.mutable_grad() = grad;
    }
  } restore;
  auto& groups = self.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const at::Tensor& p : groups[g].params()) {
      if (!p.grad().defined()) continue;
      if (!in_loop[g]) {
        restore.aside.emplace_back(p, p.grad());
        p.mutable_grad() = at::Tensor();
      } else if (maximize) {
        p.grad().neg_();
        restore.negated.push_back(p.grad());
      }
    }
  }
  libtorch_step();
}

// What every step() here does: the closure (under grad mode), then each group with gradients
// by its kernel — `group_step(group, group_index, params_with_grad, kernel)` for foreach and
// fused, and for the for-loop too where `libtorch_step` is empty — and otherwise the for-loop
// groups together through LibTorch's step.
template <class GroupStep>
torch::Tensor multi_tensor_step(torch::optim::Optimizer& self, const LossClosure& closure,
                                const KernelFlags& flags, const std::function<void()>& libtorch_step,
                                GroupStep&& group_step) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  auto& groups = self.param_groups();
  std::vector<bool> in_loop(groups.size(), false);
  bool any_loop = false;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    Tensors params;
    for (const at::Tensor& p : groups[g].params()) {
      if (p.grad().defined()) params.push_back(p);
    }
    if (params.empty()) continue;
    const StepKernel kernel = choose_step_kernel(flags, params);
    if (kernel == StepKernel::for_loop && libtorch_step) {
      in_loop[g] = any_loop = true;
      continue;
    }
    group_step(groups[g], g, params, kernel);
  }
  if (any_loop) for_loop_step(self, in_loop, flags.maximize, libtorch_step);
  return loss;
}

// ---- Adam and AdamW ----------------------------------------------------------------------------

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};

template <class Options>
AdamHyper adam_hyper(const Options& o, bool maximize, bool decoupled) {
  AdamHyper h;
  h.lr = o.lr();
  h.beta1 = std::get<0>(o.betas());
  h.beta2 = std::get<1>(o.betas());
  h.eps = o.eps();
  h.weight_decay = o.weight_decay();
  h.amsgrad = o.amsgrad();
  h.maximize = maximize;
  h.decoupled = decoupled;
  return h;
}

// A group's parameters with gradients and their state, created as LibTorch's Adam::step does
// (and torch.optim's _init_group: zeros shaped as the parameter, max_exp_avg_sq with amsgrad).
template <class State>
struct AdamLists {
  Tensors params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
  std::vector<State*> states;
};

// Group `g`'s learning rate as a device tensor in graph mode (CapturableOptimizer), else undefined:
// the fused kernels then take the group's number.
at::Tensor graph_learning_rate(const CaptureState& capture, std::size_t g) {
  return capture.enabled ? capture.lr.at(g) : at::Tensor();
}

// A replay repeats the captured kernels, a state's creation (zero fills) included: a captured
// step must find every state made by an eager step before it.
void refuse_new_state_in_capture(bool capturing, const at::Tensor& p, const char* name) {
  OML_CHECK(!capturing, RuntimeError, "optimizer '", name, "': a parameter of shape ", p.sizes(),
            " takes its first step in the captured step, which a replay would repeat");
}

template <class State>
AdamLists<State> adam_lists(torch::optim::Optimizer& self, const Tensors& params, bool amsgrad, bool fused,
                            bool capturing, const char* name) {
  AdamLists<State> lists;
  for (const at::Tensor& p : params) {
    OML_CHECK(!p.grad().is_sparse(), UsageError, "optimizer '", name, "' does not support sparse gradients");
    if (fused) check_fused_parameter(p, name);
    const auto key = torch_compat::optimizer_state_key(p);
    if (capturing) {
      const auto found = self.state().find(key);
      if (found == self.state().end() || !found->second) refuse_new_state_in_capture(capturing, p, name);
    }
    auto& slot = self.state()[key];
    if (!slot) {
      auto fresh = std::make_unique<State>();
      fresh->step(0);
      fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      if (amsgrad) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    auto& state = static_cast<State&>(*slot);
    // amsgrad switched on for a state written without it: its maximum starts at zero.
    if (amsgrad && !state.max_exp_avg_sq().defined()) {
      refuse_new_state_in_capture(capturing, p, name);
      state.max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    }
    lists.params.push_back(p);
    lists.grads.push_back(p.grad());
    lists.exp_avgs.push_back(state.exp_avg());
    lists.exp_avg_sqs.push_back(state.exp_avg_sq());
    if (amsgrad) lists.max_exp_avg_sqs.push_back(state.max_exp_avg_sq());
    lists.states.push_back(&state);
  }
  return lists;
}

// Adam's bias-corrected step size and sqrt(1 - beta2 ** step) for `step`, in Python floats as
// torch.optim computes them outside capturable mode (pow, as Python's float **).
struct AdamCorrection {
  double step_size, bias_correction2_sqrt;
};
AdamCorrection adam_correction(const AdamHyper& h, int64_t step) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(h.beta1, t);
  const double bias_correction2 = 1 - std::pow(h.beta2, t);
  return {h.lr / bias_correction1, std::pow(bias_correction2, 0.5)};
}

// _multi_tensor_adam with capturable=False, on tensors of one device and dtype; `steps` are the
// steps being taken (already counted). The step count is the int64 of LibTorch's state:
// torch.optim's float32 step tensor, read with .item(), is the same number.
void adam_foreach(const AdamHyper& h, Tensors params, Tensors grads, Tensors exp_avgs, Tensors exp_avg_sqs,
                  Tensors max_exp_avg_sqs, const std::vector<int64_t>& steps) {
  if (h.maximize) grads = at::_foreach_neg(grads);
  if (h.weight_decay != 0) {
    if (h.decoupled) {
      at::_foreach_mul_(params, at::Scalar(1 - h.lr * h.weight_decay));
    } else if (h.maximize) {
      at::_foreach_add_(grads, params, at::Scalar(h.weight_decay));  // reuses the negated copy
    } else {
      grads = at::_foreach_add(grads, params, at::Scalar(h.weight_decay));
    }
  }
  torch_compat::foreach_lerp_(exp_avgs, grads, 1 - h.beta1);
  at::_foreach_mul_(exp_avg_sqs, at::Scalar(h.beta2));
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, at::Scalar(1 - h.beta2));
  grads.clear();
  // step_size = (lr / bc1) * -1, as _multi_tensor_adam negates it.
  std::vector<at::Scalar> step_size, bias_correction2_sqrt;
  for (const int64_t step : steps) {
    const AdamCorrection c = adam_correction(h, step);
    step_size.emplace_back(-c.step_size);
    bias_correction2_sqrt.emplace_back(c.bias_correction2_sqrt);
  }
  Tensors denom;
  if (h.amsgrad) {
    at::_foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs);
    denom = at::_foreach_sqrt(max_exp_avg_sqs);
  } else {
    denom = at::_foreach_sqrt(exp_avg_sqs);
  }
  at::_foreach_div_(denom, scalars(bias_correction2_sqrt));
  at::_foreach_add_(denom, at::Scalar(h.eps));
  at::_foreach_addcdiv_(params, exp_avgs, denom, scalars(step_size));
}

// _single_tensor_adam with capturable=False on one parameter (real, not complex): torch.optim's
// operators in its order, so that the for-loop, PyTorch's default on the CPU, equals torch.optim
// to the bit. (LibTorch's own Adam::step updates the first moment with mul_ and add_ where
// torch.optim has lerp_: within 1e-6 after 100 steps, not equal.) `step`: the step being taken.
void adam_for_loop(const AdamHyper& h, const at::Tensor& param, const at::Tensor& grad_given,
                   const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq, const at::Tensor& max_exp_avg_sq,
                   int64_t step) {
  at::Tensor grad = h.maximize ? grad_given.neg() : grad_given;
  if (h.weight_decay != 0) {
    if (h.decoupled) {
      param.mul_(1 - h.lr * h.weight_decay);
    } else {
      grad = grad.add(param, h.weight_decay);
    }
  }
  exp_avg.lerp_(grad, 1 - h.beta1);
  exp_avg_sq.mul_(h.beta2).addcmul_(grad, grad, 1 - h.beta2);
  const AdamCorrection c = adam_correction(h, step);
  at::Tensor denom;
  if (h.amsgrad) {
    at::Tensor max_out = max_exp_avg_sq;  // a handle: maximum_out writes into the state's storage
    at::maximum_out(max_out, max_exp_avg_sq, exp_avg_sq);
    denom = at::div(max_exp_avg_sq.sqrt(), c.bias_correction2_sqrt).add_(h.eps);
  } else {
    denom = at::div(exp_avg_sq.sqrt(), c.bias_correction2_sqrt).add_(h.eps);
  }
  param.addcdiv_(exp_avg, denom, -c.step_size);
}

// `lr`: graph_learning_rate (defined in graph mode, where `capture` says whether this step is
// being captured).
template <class State>
void adam_group_step(const AdamHyper& h, AdamLists<State>& lists, StepKernel kernel,
                     StepTensors& step_tensors, CaptureState& capture, const at::Tensor& lr,
                     const at::Tensor& found_inf, const char* name) {
  if (kernel == StepKernel::for_loop) {
    for (std::size_t i = 0; i < lists.params.size(); ++i) {
      State& state = *lists.states[i];
      state.step(state.step() + 1);
      adam_for_loop(h, lists.params[i], lists.grads[i], lists.exp_avgs[i], lists.exp_avg_sqs[i],
                    h.amsgrad ? lists.max_exp_avg_sqs[i] : at::Tensor(), state.step());
    }
    return;
  }
  for (const Positions& bucket : by_device_and_dtype(lists.params)) {
    const Tensors max_exp_avg_sqs = h.amsgrad ? pick(lists.max_exp_avg_sqs, bucket) : Tensors{};
    if (kernel == StepKernel::foreach) {
      std::vector<int64_t> steps;
      for (const std::size_t i : bucket) {
        State& state = *lists.states[i];
        state.step(state.step() + 1);
        steps.push_back(state.step());
      }
      adam_foreach(h, pick(lists.params, bucket), pick(lists.grads, bucket), pick(lists.exp_avgs, bucket),
                   pick(lists.exp_avg_sqs, bucket), max_exp_avg_sqs, steps);
      continue;
    }
    // _fused_adam: the kernel reads each step from a float32 tensor on the parameter's device,
    // counted up before the call (torch._foreach_add_(state_steps, 1)). Kept beside LibTorch's
    // int64 step and made again from it when they differ (the first step, a loaded state).
    Tensors steps;
    for (const std::size_t i : bucket) {
      const at::Tensor& p = lists.params[i];
      State& state = *lists.states[i];
      StepTensor& entry = step_tensors[p.unsafeGetTensorImpl()];
      if (!entry.tensor.defined() || entry.value != state.step() || entry.tensor.device() != p.device()) {
        refuse_new_state_in_capture(capture.capturing, p, name);
        entry.tensor = torch::full({}, static_cast<double>(state.step()),
                                   torch::TensorOptions().dtype(torch::kFloat).device(p.device()));
      }
      state.step(state.step() + 1);
      entry.value = state.step();
      steps.push_back(entry.tensor);
      if (capture.capturing) capture.stepped.push_back(p);
    }
    at::_foreach_add_(steps, at::Scalar(1));
    const auto fused_adam = [&](const auto& learning_rate) {
      torch_compat::fused_adam_(pick(lists.params, bucket), pick(lists.grads, bucket),
                                pick(lists.exp_avgs, bucket), pick(lists.exp_avg_sqs, bucket),
                                max_exp_avg_sqs, steps, learning_rate, h.beta1, h.beta2, h.weight_decay,
                                h.eps, h.amsgrad, h.maximize, h.decoupled, found_inf);
    };
    if (lr.defined()) {
      fused_adam(lr);
    } else {
      fused_adam(h.lr);
    }
    // A skipped step counts no step either (torch.optim's _fused_adam subtracts found_inf); the
    // host's counts are taken back from these by settle_step_counts.
    if (found_inf.defined()) at::_foreach_sub_(steps, Tensors(steps.size(), found_inf.reshape({})));
  }
}

// Every kernel here, the for-loop included (adam_for_loop: LibTorch's Adam::step is not used).
template <class Options, class State>
torch::Tensor adam_step(torch::optim::Optimizer& self, const LossClosure& closure, const KernelFlags& flags,
                        bool decoupled, StepTensors& step_tensors, CaptureState& capture,
                        const at::Tensor& found_inf, const char* name) {
  return multi_tensor_step(
      self, closure, flags, /*libtorch_step=*/{},
      [&](torch::optim::OptimizerParamGroup& group, std::size_t g, const Tensors& params, StepKernel kernel) {
        const AdamHyper h =
            adam_hyper(static_cast<const Options&>(group.options()), flags.maximize, decoupled);
        auto lists =
            adam_lists<State>(self, params, h.amsgrad, kernel == StepKernel::fused, capture.capturing, name);
        adam_group_step(h, lists, kernel, step_tensors, capture, graph_learning_rate(capture, g), found_inf,
                        name);
      });
}

// ---- SGD ---------------------------------------------------------------------------------------

struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

// The momentum buffer of `p` (undefined before its first step with momentum).
at::Tensor momentum_buffer(torch::optim::Optimizer& self, const at::Tensor& p) {
  auto& state = self.state();
  const auto found = state.find(torch_compat::optimizer_state_key(p));
  if (found == state.end() || !found->second) return at::Tensor();
  return static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer();
}

// A new state of `p` holding `buffer`, as LibTorch's SGD::step creates it.
void set_momentum_buffer(torch::optim::Optimizer& self, const at::Tensor& p, const at::Tensor& buffer) {
  auto fresh = std::make_unique<torch::optim::SGDParamState>();
  fresh->momentum_buffer(buffer);
  self.state()[torch_compat::optimizer_state_key(p)] = std::move(fresh);
}

// _multi_tensor_sgd on tensors of one device and dtype.
void sgd_foreach(torch::optim::Optimizer& self, const SgdHyper& h, Tensors params, Tensors grads) {
  const bool sparse =
      std::any_of(grads.begin(), grads.end(), [](const at::Tensor& g) { return g.is_sparse(); });
  if (h.maximize) grads = at::_foreach_neg(grads);
  if (h.weight_decay != 0) {
    if (h.maximize) {
      at::_foreach_add_(grads, params, at::Scalar(h.weight_decay));  // reuses the negated copy
    } else {
      grads = at::_foreach_add(grads, params, at::Scalar(h.weight_decay));
    }
  }
  if (h.momentum != 0) {
    Tensors bufs;
    for (const at::Tensor& p : params) bufs.push_back(momentum_buffer(self, p));
    const bool all_have_buffers =
        std::all_of(bufs.begin(), bufs.end(), [](const at::Tensor& b) { return b.defined(); });
    if (all_have_buffers) {
      at::_foreach_mul_(bufs, at::Scalar(h.momentum));
      at::_foreach_add_(bufs, grads, at::Scalar(1 - h.dampening));
    } else {
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (!bufs[i].defined()) {
          bufs[i] = grads[i].detach().clone();
          set_momentum_buffer(self, params[i], bufs[i]);
        } else {
          bufs[i].mul_(h.momentum).add_(grads[i], 1 - h.dampening);
        }
      }
    }
    if (h.nesterov) {
      // In place, as torch.optim: without maximize or weight decay these are the .grad tensors.
      at::_foreach_add_(grads, bufs, at::Scalar(h.momentum));
    } else {
      grads = bufs;
    }
  }
  if (!sparse) {
    at::_foreach_add_(params, grads, at::Scalar(-h.lr));
  } else {
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].add_(grads[i], -h.lr);  // foreach has no sparse ops
  }
}

// `lr` defined (graph mode): the learning rate is read from it instead of h.lr.
void fused_sgd_call(const SgdHyper& h, const Tensors& params, const Tensors& grads, const Tensors& bufs,
                    bool is_first_step, const at::Tensor& lr, const at::Tensor& found_inf) {
  for (const Positions& bucket : by_device_and_dtype(params)) {
    const auto fused_sgd = [&](const auto& learning_rate) {
      torch_compat::fused_sgd_(pick(params, bucket), pick(grads, bucket),
                               bufs.empty() ? Tensors{} : pick(bufs, bucket), h.weight_decay, h.momentum,
                               learning_rate, h.dampening, h.nesterov, h.maximize, is_first_step, found_inf);
    };
    if (lr.defined()) {
      fused_sgd(lr);
    } else {
      fused_sgd(h.lr);
    }
  }
}

// _fused_sgd. PyTorch's first step (is_first_step: the kernel copies the gradient into the new
// buffer) is only taken when no parameter has a buffer yet; here the parameters without one take
// it in a call of their own, the others the ordinary step.
void sgd_fused(torch::optim::Optimizer& self, const SgdHyper& h, const Tensors& params, const Tensors& grads,
               bool capturing, const at::Tensor& lr, const at::Tensor& found_inf) {
  for (const at::Tensor& g : grads)
    OML_CHECK(!g.is_sparse(), UsageError,
              "optimizer 'sgd' with fused: true does not support sparse gradients");
  for (const at::Tensor& p : params) check_fused_parameter(p, "sgd");
  if (h.momentum == 0) {
    fused_sgd_call(h, params, grads, {}, /*is_first_step=*/false, lr, found_inf);
    return;
  }
  Tensors old_params, old_grads, old_bufs, new_params, new_grads, new_bufs;
  for (std::size_t i = 0; i < params.size(); ++i) {
    at::Tensor buf = momentum_buffer(self, params[i]);
    if (buf.defined()) {
      old_params.push_back(params[i]);
      old_grads.push_back(grads[i]);
      old_bufs.push_back(buf);
    } else {
      refuse_new_state_in_capture(capturing, params[i], "sgd");
      // The first step copies the gradient into it; a first step skipped on the device would
      // leave it as allocated, so then it starts from zeros (the next step's momentum of zero).
      buf = found_inf.defined() ? at::zeros_like(grads[i]) : at::empty_like(grads[i]);
      set_momentum_buffer(self, params[i], buf);
      new_params.push_back(params[i]);
      new_grads.push_back(grads[i]);
      new_bufs.push_back(buf);
    }
  }
  if (!old_params.empty())
    fused_sgd_call(h, old_params, old_grads, old_bufs, /*is_first_step=*/false, lr, found_inf);
  if (!new_params.empty())
    fused_sgd_call(h, new_params, new_grads, new_bufs, /*is_first_step=*/true, lr, found_inf);
}

// The found_inf handed to the coming step (undefined when none), which only it reads.
at::Tensor take_found_inf(at::Tensor& pending, bool& unsettled) {
  at::Tensor found_inf = std::move(pending);
  pending = at::Tensor();
  if (found_inf.defined()) unsettled = true;
  return found_inf;
}

}  // namespace

bool fused_kernels_available() { return torch_compat::has_fused_optimizers; }

std::string kernel_flags_problem(const KernelFlags& flags) {
  if (flags.fused.value_or(false) && flags.foreach.value_or(false))
    return "fused and foreach cannot both be true (torch.optim refuses them together too); set one of them, "
           "or leave foreach out";
  if (flags.fused.value_or(false) && !fused_kernels_available())
    return "fused: true needs ATen's fused optimizer kernels, which this build's LibTorch (" +
           std::string(TORCH_VERSION) +
           ") does not have (2.4 and later do); use foreach: true or leave fused out";
  return "";
}

StepKernel choose_step_kernel(const KernelFlags& flags, const std::vector<at::Tensor>& params) {
  if (flags.fused.value_or(false)) return StepKernel::fused;
  if (flags.foreach) return *flags.foreach ? StepKernel::foreach : StepKernel::for_loop;
  if (flags.fused) return StepKernel::for_loop;  // fused: false given, foreach not: no default
  return std::all_of(params.begin(), params.end(), has_foreach_kernels) ? StepKernel::foreach
                                                                        : StepKernel::for_loop;
}

namespace {

// The name in messages, by LibTorch's class.
template <class Base>
const char* optimizer_name();
template <>
const char* optimizer_name<torch::optim::Adam>() {
  return "adam";
}
template <>
const char* optimizer_name<torch::optim::AdamW>() {
  return "adamw";
}
template <>
const char* optimizer_name<torch::optim::SGD>() {
  return "sgd";
}

}  // namespace

template <class Base, class Options>
MultiTensor<Base, Options>::MultiTensor(std::vector<torch::optim::OptimizerParamGroup> groups,
                                        Options defaults, KernelFlags flags)
    : Base(std::move(groups), std::move(defaults)), flags_(flags) {
  check_flags(flags_, optimizer_name<Base>());
}

// LibTorch's state class of each optimizer with a step count; SGD keeps none.
template <class Base>
struct StepCountedState {
  using type = void;
};
template <>
struct StepCountedState<torch::optim::Adam> {
  using type = torch::optim::AdamParamState;
};
template <>
struct StepCountedState<torch::optim::AdamW> {
  using type = torch::optim::AdamWParamState;
};

template <class Base, class Options>
std::string MultiTensor<Base, Options>::capture_problem() const {
  const std::string who = std::string("optimizer '") + optimizer_name<Base>() + "'";
  if (!fused_kernels_available()) {
    return who + " steps a CUDA graph with its fused kernel, which this build's LibTorch (" +
           std::string(TORCH_VERSION) + ") does not have (2.4 and later do)";
  }
  if (flags_.fused == std::optional<bool>(false))
    return who + " has fused: false, and a CUDA graph steps it with its fused kernel";
  if (flags_.foreach.value_or(false))
    return who + " has foreach: true, and a CUDA graph steps it with its fused kernel";
  return "";
}

template <class Base, class Options>
void MultiTensor<Base, Options>::enable_capture() {
  OML_ASSERT(capture_problem().empty(), capture_problem());
  flags_.fused = true;
  flags_.foreach.reset();
  capture_.enabled = true;
  refresh_learning_rates();
}

template <class Base, class Options>
void MultiTensor<Base, Options>::refresh_learning_rates() {
  // Never inside a capture: a fill captured there would be replayed with the value of the day.
  if (!capture_.enabled || capture_.capturing) return;
  auto& groups = this->param_groups();
  capture_.lr.resize(groups.size());
  capture_.lr_value.resize(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].params().empty()) continue;
    const double lr = groups[g].options().get_lr();
    const c10::Device device = groups[g].params().front().device();
    at::Tensor& tensor = capture_.lr[g];
    if (!tensor.defined() || tensor.device() != device) {
      tensor = torch::full({}, lr, torch::TensorOptions().dtype(torch::kFloat).device(device));
    } else if (capture_.lr_value[g] != lr) {
      tensor.fill_(lr);  // queued, not waited for
    }
    capture_.lr_value[g] = lr;
  }
}

template <class Base, class Options>
void MultiTensor<Base, Options>::count_captured_steps(int64_t delta) {
  using State = typename StepCountedState<Base>::type;
  if constexpr (!std::is_void_v<State>) {
    for (const at::Tensor& p : capture_.stepped) {
      auto& state = static_cast<State&>(*this->state().at(torch_compat::optimizer_state_key(p)));
      state.step(state.step() + delta);
      step_tensors_.at(p.unsafeGetTensorImpl()).value += delta;
    }
  }
}

template <class Base, class Options>
void MultiTensor<Base, Options>::begin_capture() {
  OML_ASSERT(capture_.enabled, "begin_capture() before enable_capture()");
  refresh_learning_rates();
  capture_.stepped.clear();
  capture_.capturing = true;
}

template <class Base, class Options>
void MultiTensor<Base, Options>::end_capture(bool captured) {
  capture_.capturing = false;
  count_captured_steps(-1);  // the captured step ran no kernel: its replays count
  if (!captured) capture_.stepped.clear();
}

template <class Base, class Options>
void MultiTensor<Base, Options>::skip_next_step_if(const at::Tensor& found_inf) {
  OML_ASSERT(skips_on_device(), "skip_next_step_if on an optimizer without its fused kernel");
  OML_ASSERT(found_inf.defined() && found_inf.numel() == 1, "found_inf must hold one value");
  found_inf_ = found_inf;
}

template <class Base, class Options>
void MultiTensor<Base, Options>::settle_step_counts() {
  using State = typename StepCountedState<Base>::type;
  if (!unsettled_steps_) return;
  unsettled_steps_ = false;
  if constexpr (!std::is_void_v<State>) {
    // Every parameter with a fused step count, read back in one copy.
    std::vector<State*> states;
    std::vector<StepTensor*> entries;
    Tensors counts;
    for (auto& group : this->param_groups()) {
      for (const at::Tensor& p : group.params()) {
        const auto state = this->state().find(torch_compat::optimizer_state_key(p));
        const auto entry = step_tensors_.find(p.unsafeGetTensorImpl());
        if (state == this->state().end() || !state->second || entry == step_tensors_.end()) continue;
        states.push_back(&static_cast<State&>(*state->second));
        entries.push_back(&entry->second);
        counts.push_back(entry->second.tensor.reshape({1}).to(at::kDouble));
      }
    }
    if (counts.empty()) return;
    const at::Tensor host = at::cat(counts).to(at::kCPU);
    const auto values = host.accessor<double, 1>();
    for (std::size_t i = 0; i < states.size(); ++i) {
      const auto count = static_cast<int64_t>(std::llround(values[static_cast<int64_t>(i)]));
      states[i]->step(count);
      entries[i]->value = count;
    }
  }
}

template <class Base, class Options>
void MultiTensor<Base, Options>::before_replay() {
  refresh_learning_rates();
}

template <class Base, class Options>
void MultiTensor<Base, Options>::after_replay() {
  count_captured_steps(1);
}

template <>
torch::Tensor MultiTensorAdam::step(LossClosure closure) {
  refresh_learning_rates();
  const at::Tensor found_inf = take_found_inf(found_inf_, unsettled_steps_);
  return adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
      *this, closure, flags_, /*decoupled=*/false, step_tensors_, capture_, found_inf, "adam");
}

template <>
torch::Tensor MultiTensorAdamW::step(LossClosure closure) {
  refresh_learning_rates();
  const at::Tensor found_inf = take_found_inf(found_inf_, unsettled_steps_);
  return adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      *this, closure, flags_, /*decoupled=*/true, step_tensors_, capture_, found_inf, "adamw");
}

template <>
torch::Tensor MultiTensorSGD::step(LossClosure closure) {
  refresh_learning_rates();
  const at::Tensor found_inf = take_found_inf(found_inf_, unsettled_steps_);
  return multi_tensor_step(
      *this, closure, flags_, [this] { torch::optim::SGD::step(); },
      [&](torch::optim::OptimizerParamGroup& group, std::size_t g, const Tensors& params, StepKernel kernel) {
        const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
        SgdHyper h;
        h.lr = o.lr();
        h.momentum = o.momentum();
        h.dampening = o.dampening();
        h.weight_decay = o.weight_decay();
        h.nesterov = o.nesterov();
        h.maximize = flags_.maximize;
        Tensors grads;
        for (const at::Tensor& p : params) grads.push_back(p.grad());
        if (kernel == StepKernel::fused) {
          sgd_fused(*this, h, params, grads, capture_.capturing, graph_learning_rate(capture_, g), found_inf);
          if (capture_.capturing)
            capture_.stepped.insert(capture_.stepped.end(), params.begin(), params.end());
          return;
        }
        for (const Positions& bucket : by_device_and_dtype(params))
          sgd_foreach(*this, h, pick(params, bucket), pick(grads, bucket));
      });
}

template class MultiTensor<torch::optim::Adam, torch::optim::AdamOptions>;
template class MultiTensor<torch::optim::AdamW, torch::optim::AdamWOptions>;
template class MultiTensor<torch::optim::SGD, torch::optim::SGDOptions>;

}  // namespace oml::optim
