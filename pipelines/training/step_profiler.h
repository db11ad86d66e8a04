#pragma once
// `profile: "FROM:TO"` / `oml-train --profile FROM:TO`: the Trainer's optimizer steps FROM through
// TO recorded into a Chrome trace, <run>/profile/rank0.steps_<FROM>-<TO>.pt.trace.json, by rank 0
// (the only rank that writes in the run directory; the Trainer gives the other ranks no range)
// (oml/report/profiler.h; docs/training.md#profiling-a-run). Each step is a `ProfilerStep#N` range,
// as torch.profiler marks steps, holding the phases the Trainer names (report::phase). A trace
// that cannot be written is a warning: it is a view of the run, not its result.
// The process calls report::prepare_profiler_process first (oml-train does, before its threads
// start).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "oml/config/run_config.h"

namespace at {
struct RecordFunction;
}  // namespace at
namespace oml::report {
class TraceSession;
}  // namespace oml::report

namespace oml::pipelines {

class StepProfiler {
 public:
  /// Records nothing without `range`. `cuda`: the run trains on a GPU (its kernels are recorded).
  StepProfiler(std::optional<config::StepRange> range, std::filesystem::path run_root, int64_t rank,
               bool cuda);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  /// Before the first batch of optimizer step `step` (the data wait included), when that batch is
  /// coming: recording starts at the first step inside the range (a run resumed inside it records
  /// the rest), and the step's range opens.
  void step_begins(int64_t step);
  /// After step `step` is applied and logged: its range closes; after the range's last step the
  /// trace is written.
  void step_ends(int64_t step);
  /// Training is over after `steps_taken` steps: a recording still running (the run stopped
  /// before the range's end) is written with the steps it has, and says so; a range never
  /// reached is said too.
  void finish(int64_t steps_taken);

 private:
  void write();

  std::optional<config::StepRange> range_;
  std::filesystem::path path_;
  bool cuda_ = false;
  std::unique_ptr<report::TraceSession> session_;
  std::unique_ptr<at::RecordFunction> step_range_;
  int64_t open_step_ = 0;   ///< the step whose range is open (0: none)
  int64_t first_step_ = 0;  ///< the first step recorded
  int64_t last_ended_ = 0;  ///< the last step recorded to its end
  bool done_ = false;       ///< the trace was written (once per run)
};

}  // namespace oml::pipelines
