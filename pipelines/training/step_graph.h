#pragma once
// `cuda_graphs: true` (docs/training.md#cuda-graphs): the training step — forward, loss,
// backward, optimizer — captured once into a CUDA graph and replayed for every later batch,
// PyTorch's whole-network capture (torch.cuda.graphs). A step of a model that is small for its
// GPU is a few hundred kernels that each cost the host several microseconds to launch; a replay
// launches them all at once, so the GPU no longer waits for the host between kernels.
//
//   StepGraph graph(device, optimizer, {model, criterion});
//   for each batch:  out = graph.step(batch, whole_step);   // whole_step: one eager step
//
// What happens to the steps, as torch.cuda.graphs' documentation does it:
//   - the first kWarmupSteps steps run `whole_step` eagerly on the graph's stream: cuDNN and
//     cuBLAS settle their choices and workspaces there, the optimizer makes its state;
//   - the next step copies its batch into static inputs on the device (images, labels) and
//     captures `whole_step` on them; nothing runs during capture, so the captured step is then
//     replayed once for that batch;
//   - every later step copies its batch into the static inputs and replays. Its loss and logs
//     are copies of what the graph wrote (queued on the device, not read), and the optimizer
//     counts the step on the host (CapturableOptimizer::after_replay).
// A batch whose inputs differ in shape or type from the captured one runs `whole_step` eagerly
// (P x K samplers make every batch alike; a run's last, shorter batch does not). After an epoch
// hook froze or unfroze parameters (check_modules), the graph is captured again after a new
// warm-up.
//
// What a replay cannot do, the conditions (step_graph_problem) and the capture itself refuse,
// with one warning, after which training continues eagerly: a step that reads something a
// replay would not refresh (a pipeline whose step takes host data beside the batch, a loss log
// computed on the host), that synchronises with the host (CUDA refuses it during capture: a
// loss whose miner reads values back), DDP's gradient communication, float16's loss scaling
// (its skipped steps are host decisions), accumulated gradients.

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/config/precision.h"
#include "oml/data/loader.h"
#include "oml/losses/criterion.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
namespace oml::optim {
class CapturableOptimizer;
}  // namespace oml::optim
namespace oml::distributed {
class CudaGraph;
}  // namespace oml::distributed

namespace oml::pipelines {

/// What decides whether a run's training steps can be captured.
struct StepGraphConditions {
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  int64_t world_size = 1;
  config::Precision precision = config::Precision::fp32;
  int64_t accumulate_grad_batches = 1;
  /// Whether the Trainer reads each step's loss after the next is queued (it does on CUDA unless
  /// OML_DEFER_STEP_READS=0): an immediate read would synchronise inside the step.
  bool deferred_reads = true;
  /// The pipeline's reason its step cannot be captured (TrainingHooks::capture_problem).
  std::string pipeline_problem;
  /// The optimizer's (CapturableOptimizer::capture_problem), or why it is not capturable at all.
  std::string optimizer_problem;
};

/// Why steps under `conditions` cannot be captured, or "" when they can.
std::string step_graph_problem(const StepGraphConditions& conditions);

/// The optimizer's capture interface, or null with `problem` set to why it has none.
optim::CapturableOptimizer* capturable_optimizer(torch::optim::Optimizer& optimizer, std::string& problem);

class StepGraph {
 public:
  /// One whole eager step on a batch: forward and loss, zero_grad, backward, clipping, the
  /// optimizer's step. Returns the loss (detached) and its logs, unread.
  using WholeStep = std::function<losses::LossOutput(const data::LoadedBatch&)>;

  /// Eager steps before the capture (torch.cuda.graphs' examples take 3).
  static constexpr int kWarmupSteps = 3;

  /// For steps on `device` with `optimizer` (enable_capture() is called here); `modules` are
  /// those whose parameters and train/eval modes the captured step depends on.
  StepGraph(c10::Device device, optim::CapturableOptimizer& optimizer,
            std::vector<torch::nn::Module*> modules);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// One optimizer step on `batch` (its images on the device already), as described above.
  losses::LossOutput step(const data::LoadedBatch& batch, const WholeStep& whole_step);

  /// After an epoch's start hooks: when a parameter's requires_grad or a module's training mode
  /// differs from the captured step's, the graph is dropped and captured again after a warm-up.
  void check_modules();

  /// Steps run by a replay so far.
  int64_t replays() const { return replays_; }

 private:
  /// requires_grad of every parameter, then is_training of every module, of `modules_`.
  std::vector<bool> module_signature() const;
  /// Whether `batch`'s inputs fit the static inputs (same shapes and types).
  bool fits(const data::LoadedBatch& batch) const;
  losses::LossOutput capture(const data::LoadedBatch& batch, const WholeStep& whole_step);
  losses::LossOutput replay(const data::LoadedBatch& batch);
  /// Gives up capturing for the rest of the run, warning with `why`.
  void give_up(const std::string& why);

  c10::Device device_;
  optim::CapturableOptimizer& optimizer_;
  std::vector<torch::nn::Module*> modules_;
  std::unique_ptr<distributed::CudaGraph> graph_;  ///< null once capturing was given up
  int warm_steps_ = 0;                             ///< eager steps since the last (re)start of the warm-up
  data::LoadedBatch static_batch_;                 ///< the captured step's inputs, on the device
  losses::LossOutput static_out_;                  ///< what the captured step wrote
  std::vector<bool> captured_signature_;
  bool warned_shape_ = false;
  int64_t replays_ = 0;
};

}  // namespace oml::pipelines
