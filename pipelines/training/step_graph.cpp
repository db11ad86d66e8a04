#include "training/step_graph.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <exception>
#include <sstream>

#include "oml/common/logging.h"
#include "oml/distributed/cuda_graph.h"
#include "oml/optim/multi_tensor.h"
#include "oml/report/profiler.h"

namespace oml::pipelines {

namespace {

// The first line of an exception's message: LibTorch's errors go on with a C++ backtrace.
std::string first_line(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes() << " " << t.scalar_type();
  return out.str();
}

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() == b.defined() && (!a.defined() || (a.sizes() == b.sizes() && a.dtype() == b.dtype()));
}

}  // namespace

std::string step_graph_problem(const StepGraphConditions& c) {
  if (std::string unavailable = distributed::cuda_graph_unavailable(c.device); !unavailable.empty())
    return unavailable;
  if (c.world_size > 1)
    return "DDP's gradient all-reduce runs on a communication thread of its own, outside any capture";
  if (c.precision == config::Precision::fp16)
    return "precision 16 scales the loss and skips steps with non-finite gradients, decisions taken on the "
           "host (bf16 needs no scaling and can be captured)";
  if (c.accumulate_grad_batches > 1)
    return "accumulate_grad_batches " + std::to_string(c.accumulate_grad_batches) +
           " makes a step of several batches";
  if (!c.deferred_reads)
    return "OML_DEFER_STEP_READS=0 reads every step's loss inside the step, which waits for the GPU";
  if (!c.pipeline_problem.empty()) return c.pipeline_problem;
  return c.optimizer_problem;
}

optim::CapturableOptimizer* capturable_optimizer(torch::optim::Optimizer& optimizer, std::string& problem) {
  auto* capturable = dynamic_cast<optim::CapturableOptimizer*>(&optimizer);
  if (capturable == nullptr) {
    problem =
        "the optimizer keeps its step counts and learning rate on the host (adam, adamw and sgd can be "
        "captured)";
    return nullptr;
  }
  problem = capturable->capture_problem();
  return capturable;
}

StepGraph::StepGraph(c10::Device device, optim::CapturableOptimizer& optimizer,
                     std::vector<torch::nn::Module*> modules)
    : device_(device), optimizer_(optimizer), modules_(std::move(modules)) {
  graph_ = std::make_unique<distributed::CudaGraph>(device_);
  optimizer_.enable_capture();
}

StepGraph::~StepGraph() = default;

std::vector<bool> StepGraph::module_signature() const {
  std::vector<bool> signature;
  for (const torch::nn::Module* module : modules_) {
    if (module == nullptr) continue;
    for (const auto& p : module->parameters(/*recurse=*/true)) signature.push_back(p.requires_grad());
    // Not modules(include_self = true): that needs the module held by a shared_ptr.
    signature.push_back(module->is_training());
    for (const auto& child : module->modules(/*include_self=*/false))
      signature.push_back(child->is_training());
  }
  return signature;
}

void StepGraph::check_modules() {
  if (!graph_ || !graph_->captured() || module_signature() == captured_signature_) return;
  log::info(
      "cuda_graphs: parameters were frozen or unfrozen (or a module's train/eval mode changed) since the "
      "training step was captured; it is captured again after " +
      std::to_string(kWarmupSteps) + " eager steps");
  graph_ = std::make_unique<distributed::CudaGraph>(device_);
  static_out_ = {};
  static_batch_ = {};
  warm_steps_ = 0;
}

bool StepGraph::fits(const data::LoadedBatch& batch) const {
  return same_layout(batch.images, static_batch_.images) && same_layout(batch.labels, static_batch_.labels);
}

void StepGraph::give_up(const std::string& why) {
  log::warn("cuda_graphs: the training step cannot be captured: " + why + "; training continues eagerly");
  graph_.reset();
  static_out_ = {};
  static_batch_ = {};
}

losses::LossOutput StepGraph::step(const data::LoadedBatch& batch, const WholeStep& whole_step) {
  if (!graph_) return whole_step(batch);  // given up
  if (warm_steps_ < kWarmupSteps) {
    ++warm_steps_;
    losses::LossOutput out;
    graph_->run([&] { out = whole_step(batch); });
    return out;
  }
  if (!graph_->captured()) return capture(batch, whole_step);
  if (fits(batch)) return replay(batch);
  if (!warned_shape_) {
    log::warn("cuda_graphs: a batch of images " + shape_of(batch.images) + " and labels " +
              shape_of(batch.labels) + " differs from the captured step's (" +
              shape_of(static_batch_.images) + ", " + shape_of(static_batch_.labels) +
              "); such batches are stepped eagerly");
    warned_shape_ = true;
  }
  return whole_step(batch);
}

losses::LossOutput StepGraph::capture(const data::LoadedBatch& batch, const WholeStep& whole_step) {
  // The static inputs: what the captured step reads, and every replay's batch is copied into.
  static_batch_ = batch;
  static_batch_.images = batch.images.to(device_).clone();
  static_batch_.labels = batch.labels.to(device_).clone();
  std::string problem;
  optimizer_.begin_capture();
  try {
    graph_->capture([&] { static_out_ = whole_step(static_batch_); });
  } catch (const std::exception& e) {
    problem = first_line(e);
  }
  optimizer_.end_capture(problem.empty());
  if (problem.empty()) {
    // A value computed on the host would be the captured batch's in every replay.
    if (!static_out_.loss.defined() || static_out_.loss.device().type() != device_.type()) {
      problem = "the loss is not computed on " + device_.str();
    }
    for (const auto& [key, value] : static_out_.logs) {
      if (problem.empty() && value.device().type() != device_.type())
        problem = "the loss's log '" + key + "' is computed on the host";
    }
  }
  if (!problem.empty()) {
    give_up(problem);
    return whole_step(batch);
  }
  captured_signature_ = module_signature();
  log::info("cuda_graphs: the training step is captured; later steps replay it");
  return replay(static_batch_);  // the captured step's own batch, in the static inputs already
}

losses::LossOutput StepGraph::replay(const data::LoadedBatch& batch) {
  const report::TraceRange range(report::phase::graph_replay);
  // Queued on the current stream before the replay, which reads them there.
  if (!batch.images.is_same(static_batch_.images))
    static_batch_.images.copy_(batch.images, /*non_blocking=*/true);
  if (!batch.labels.is_same(static_batch_.labels))
    static_batch_.labels.copy_(batch.labels, /*non_blocking=*/true);
  optimizer_.before_replay();
  graph_->replay();
  optimizer_.after_replay();
  ++replays_;
  // The next replay overwrites the graph's outputs: the step's values are copies.
  losses::LossOutput out;
  out.loss = static_out_.loss.clone();
  for (const auto& [key, value] : static_out_.logs) out.logs[key] = value.clone();
  return out;
}

}  // namespace oml::pipelines
