#pragma once
// Adam, AdamW and SGD with torch.optim's `foreach`, `fused` and `maximize` (PyTorch 2.x).
//
// torch.optim updates a parameter group in one of three ways:
//   - the for-loop (`_single_tensor_adam`): one parameter at a time;
//   - foreach (`_multi_tensor_adam`, `_multi_tensor_sgd`): ATen's _foreach_ ops, each a few
//     kernel launches for the whole group (on CUDA; on the CPU they loop per tensor);
//   - fused (`_fused_adam`, `_fused_sgd`): one kernel for the whole update
//     (at::_fused_adam_, _fused_adamw_, _fused_sgd_; CPU and CUDA since LibTorch 2.4).
// With neither flag given it picks foreach when every parameter of the group is on a device
// with foreach kernels (CUDA), the for-loop otherwise; `fused` is never its default.
//
// These classes are LibTorch's torch::optim::Adam / AdamW / SGD with step() overridden. Their
// state stays LibTorch's AdamParamState / AdamWParamState / SGDParamState (int64 `step`,
// `exp_avg`, `exp_avg_sq`, `max_exp_avg_sq`, `momentum_buffer`) in LibTorch's archive, so a
// checkpoint is the same whichever way the steps were taken, and resumes under any flags. Adam's
// and AdamW's for-loop runs _single_tensor_adam's operators in its order (bit-equal to
// torch.optim; LibTorch's Adam::step is not), SGD's is LibTorch's own step; foreach composes the
// _foreach_ ops as torch/optim/adam.py and sgd.py do; fused calls the ATen kernel, which reads the
// step count from a float32 tensor on the parameter's device: one per parameter is kept beside
// the state and rebuilt from the int64 `step` whenever they differ (a fresh optimizer, a loaded
// state).
//
// Gradients reach step() unscaled: GradScaler unscales them first, so the fused kernels get no
// grad_scale. Whether a step with Inf/NaN gradients is taken is decided on the host (the
// for-loop and foreach: GradScaler::unscale reads its answer, as torch.amp.GradScaler.step does
// for them) or, with the fused kernel, on the device: skip_next_step_if hands the kernel
// GradScaler's found_inf, as torch.amp.GradScaler.step hands it a fused optimizer, and nothing
// is read back (DeviceSkipping).

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace oml::optim {

/// How a step updates one parameter group.
enum class StepKernel { for_loop, foreach, fused };

/// torch.optim's flags of Adam, AdamW and SGD besides the hyper-parameters, for every group.
struct KernelFlags {
  std::optional<bool> foreach;  ///< unset: PyTorch's default (see choose_step_kernel)
  std::optional<bool> fused;    ///< unset or false: not fused
  bool maximize = false;        ///< ascend: the gradient's negative is used
};

/// Whether this LibTorch has the fused kernels on the CPU and CUDA (2.4 and later; not 1.13).
bool fused_kernels_available();

/// What torch.optim refuses at construction, and `fused` where this LibTorch has no fused
/// kernels: "" when `flags` are fine, else the problem (always about `fused`). The config's
/// checks (optim/register.cpp) and the classes' constructors say the same.
std::string kernel_flags_problem(const KernelFlags& flags);

/// torch.optim's choice for a group whose parameters with a gradient are `params`
/// (torch/optim/adam.py's adam(), sgd.py's sgd()): fused when `fused` is true; otherwise the
/// given `foreach`; with neither flag given foreach when every parameter is on CUDA (or XPU, or
/// a PrivateUse1 device: _get_foreach_kernels_supported_devices) and the for-loop otherwise. An
/// explicit `fused: false` without `foreach` is the for-loop, as in PyTorch (its default is
/// only chosen when both are None).
StepKernel choose_step_kernel(const KernelFlags& flags, const std::vector<at::Tensor>& params);

/// A float32 step count on a parameter's device for the fused kernels, and the int64 step it
/// holds.
struct StepTensor {
  at::Tensor tensor;
  int64_t value = 0;
};
using StepTensors = std::unordered_map<const void*, StepTensor>;  ///< by parameter TensorImpl

/// An optimizer whose step() can be captured into a CUDA graph and replayed (`cuda_graphs:`,
/// pipelines/training/step_graph.h). A replay runs the captured kernels without step()'s host
/// code, so whatever changes from step to step must live in device memory the kernels read: the
/// step counts (as torch.optim's fused kernels read them) and the learning rate, which a
/// scheduler changes on the host (torch.optim's tensor `lr`). The host's own step counts, which
/// checkpoints hold, are kept by counting the replays.
///
///   enable_capture();                   // before the first step: every step() from now on
///   step(); step(); ...                 // runs the kernels a replay would run, eagerly
///   begin_capture(); step(); end_capture(true);  // inside the capture of the step
///   before_replay(); replay(); after_replay();   // each later step
class CapturableOptimizer {
 public:
  virtual ~CapturableOptimizer() = default;
  /// "" when enable_capture() can make step() capturable, else why not (for the warning of a
  /// run that then trains eagerly).
  virtual std::string capture_problem() const = 0;
  /// Every later step() takes the fused kernels with the learning rate read from a float32
  /// tensor on the parameters' device, whatever `foreach` / `fused` said (capture_problem()
  /// must be "").
  virtual void enable_capture() = 0;
  /// The step() that follows is being captured: the learning rates are written to the device
  /// first, and that step() refuses (RuntimeError) what a replay could not repeat — creating a
  /// parameter's state (its first step), which must have happened in an eager step before.
  virtual void begin_capture() = 0;
  /// After the captured step(): its host-side step counts are taken back (the capture ran no
  /// kernel); `captured` false when the capture failed.
  virtual void end_capture(bool captured) = 0;
  /// Before each replay: learning rates changed since (a scheduler's) are written to the device.
  virtual void before_replay() = 0;
  /// After each replay: the parameters the captured step updated count one more step.
  virtual void after_replay() = 0;
};

/// An optimizer that skips a step on the device where torch.optim's fused optimizers do, under
/// torch.amp.GradScaler: given `found_inf`, the kernel itself leaves parameters, state and step
/// counts unchanged when a gradient was Inf/NaN, so the host never waits to read the answer.
///
///   scaler.unscale_in_place(params);                     // found_inf stays on the device
///   optimizer.skip_next_step_if(scaler.found_inf());
///   optimizer.step();                                    // applied or not, on the device
class DeviceSkipping {
 public:
  virtual ~DeviceSkipping() = default;
  /// Whether step() takes the kernel that reads found_inf (`fused: true`).
  virtual bool skips_on_device() const = 0;
  /// The next step() changes nothing where `found_inf` (float32 [1] on the parameters' device)
  /// is nonzero. Only where skips_on_device().
  virtual void skip_next_step_if(const at::Tensor& found_inf) = 0;
  /// The host's step counts (what checkpoints hold) count every step() taken; after steps that
  /// may have been skipped on the device, this takes them from the device's (one read). Called
  /// by save_optimizer_state.
  virtual void settle_step_counts() = 0;
};

/// What a MultiTensor keeps for CapturableOptimizer.
struct CaptureState {
  bool enabled = false;
  bool capturing = false;
  std::vector<at::Tensor> lr;       ///< per parameter group: float32, on its parameters' device
  std::vector<double> lr_value;     ///< what `lr` holds
  std::vector<at::Tensor> stepped;  ///< the parameters the captured step() updated
};

/// torch.optim's Adam (decoupled_weight_decay=False), AdamW and SGD with foreach / fused /
/// maximize: LibTorch's class `Base` with step() overridden (its options `Options`). Built only
/// for the three aliases below (optim/multi_tensor.cpp instantiates them).
template <class Base, class Options>
class MultiTensor : public Base, public CapturableOptimizer, public DeviceSkipping {
 public:
  using LossClosure = torch::optim::Optimizer::LossClosure;
  /// UsageError when kernel_flags_problem(flags) names a problem.
  MultiTensor(std::vector<torch::optim::OptimizerParamGroup> groups, Options defaults, KernelFlags flags);
  torch::Tensor step(LossClosure closure = nullptr) override;
  const KernelFlags& flags() const { return flags_; }

  std::string capture_problem() const override;
  void enable_capture() override;
  void begin_capture() override;
  void end_capture(bool captured) override;
  void before_replay() override;
  void after_replay() override;

  bool skips_on_device() const override { return flags_.fused.value_or(false); }
  void skip_next_step_if(const at::Tensor& found_inf) override;
  void settle_step_counts() override;

 private:
  /// Writes every group's learning rate that changed into its device tensor (graph mode).
  void refresh_learning_rates();
  /// Adds `delta` to the host step counts of capture_.stepped (Adam and AdamW; SGD counts none).
  void count_captured_steps(int64_t delta);

  KernelFlags flags_;
  StepTensors step_tensors_;  ///< fused Adam and AdamW: the kernels' float32 step counts
  CaptureState capture_;
  at::Tensor found_inf_;          ///< for the next step() only (skip_next_step_if)
  bool unsettled_steps_ = false;  ///< a step() was taken with found_inf since settle_step_counts
};

using MultiTensorAdam = MultiTensor<torch::optim::Adam, torch::optim::AdamOptions>;
using MultiTensorAdamW = MultiTensor<torch::optim::AdamW, torch::optim::AdamWOptions>;
/// With fused, a parameter whose first gradient comes after the other parameters' first step
/// gets its momentum buffer from a separate first-step kernel call (PyTorch's _fused_sgd fails
/// there: it hands the kernel a None buffer).
using MultiTensorSGD = MultiTensor<torch::optim::SGD, torch::optim::SGDOptions>;

template <>
torch::Tensor MultiTensorAdam::step(LossClosure closure);
template <>
torch::Tensor MultiTensorAdamW::step(LossClosure closure);
template <>
torch::Tensor MultiTensorSGD::step(LossClosure closure);

extern template class MultiTensor<torch::optim::Adam, torch::optim::AdamOptions>;
extern template class MultiTensor<torch::optim::AdamW, torch::optim::AdamWOptions>;
extern template class MultiTensor<torch::optim::SGD, torch::optim::SGDOptions>;

}  // namespace oml::optim
