#pragma once
// A profile of part of a run as a Chrome trace (JSON), which Perfetto (ui.perfetto.dev),
// chrome://tracing and TensorBoard's profiler plugin open: LibTorch's operators on the CPU, with
// their CUDA kernels and copies when the run uses a GPU, inside the ranges the code names with
// TraceRange (the training step's phases: docs/training.md#profiling-a-run).
//
// The recorder is LibTorch's own: Kineto on LibTorch 2.x (CPU and CUDA activity, what
// torch.profiler records), the legacy autograd profiler on 1.13, whose Debian build has no
// Kineto (CPU operators and the named ranges; no CUDA kernels). One recording per process at a
// time, on the thread that starts it (and what it hands work to: autograd's backward threads, not
// the data loader's workers).

#include <ATen/record_function.h>

#include <filesystem>
#include <memory>

#include "oml/report/profiler_setup.h"

namespace oml::report {

/// The names of the training step's phases in a trace (pipelines/training/trainer.cpp).
namespace phase {
inline constexpr const char* data_wait = "oml::data_wait";  ///< waiting for the loader's batch
inline constexpr const char* forward = "oml::forward";      ///< the model on the batch
inline constexpr const char* loss = "oml::loss";            ///< the criterion (and its miner)
inline constexpr const char* backward = "oml::backward";    ///< backward, with DDP's all-reduce
inline constexpr const char* optimizer = "oml::optimizer";  ///< unscale, clip, step, scheduler
/// `cuda_graphs`: the captured step (forward, loss, backward, optimizer) launched as one graph
inline constexpr const char* graph_replay = "oml::graph_replay";
inline constexpr const char* logging = "oml::logging";        ///< the loss read back, the logs written
inline constexpr const char* checkpoint = "oml::checkpoint";  ///< the state copied for a writer
inline constexpr const char* validation = "oml::validation";  ///< a validation at an epoch's end
/// Between epochs: what an epoch costs beyond its steps (train mode, hooks, the loader's start;
/// then buffers, validation, checkpoints, schedulers).
inline constexpr const char* epoch_start = "oml::epoch_start";
inline constexpr const char* epoch_end = "oml::epoch_end";
}  // namespace phase

/// A named range in the trace while a TraceSession records; when none does it costs one check
/// of LibTorch's record-function callbacks.
class TraceRange {
 public:
  explicit TraceRange(const char* name) : guard_(at::RecordScope::USER_SCOPE) {
    if (guard_.isActive()) guard_.before(name);
  }
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  at::RecordFunction guard_;
};

/// One recording: started by the constructor, written by save(). Destroyed without save(), it
/// stops and writes nothing.
class TraceSession {
 public:
  /// Starts recording on this thread, CUDA activity included when `cuda` (and LibTorch has
  /// Kineto). RuntimeError when a profiler is already recording on this thread.
  explicit TraceSession(bool cuda);
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  /// Stops recording and writes the trace to `path` (through a temporary file in its folder,
  /// renamed when complete). RuntimeError naming the path when it cannot be written.
  void save(const std::filesystem::path& path);

  /// "Kineto" or "the legacy autograd profiler": what records on this LibTorch.
  static const char* recorder_name();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace oml::report
