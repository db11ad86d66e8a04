#include "training/step_profiler.h"

#include <string>

#include "oml/common/logging.h"
#include "oml/report/profiler.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

StepProfiler::StepProfiler(std::optional<config::StepRange> range, fs::path run_root, int64_t rank, bool cuda)
    : range_(range), cuda_(cuda) {
  if (range_) {
    report::TraceSession::prepare_process(cuda_);
    path_ = run_root / "profile" /
            ("rank" + std::to_string(rank) + ".steps_" + std::to_string(range_->from) + "-" +
             std::to_string(range_->to) + ".pt.trace.json");
  }
}

StepProfiler::~StepProfiler() {
  step_range_.reset();  // before the session it belongs to
}

void StepProfiler::step_begins(int64_t step) {
  if (!range_ || done_ || step == open_step_ || step < range_->from || step > range_->to) return;
  if (!session_) {
    session_ = std::make_unique<report::TraceSession>(cuda_);
    first_step_ = step;
    log::info("profiling steps " + std::to_string(step) + " to " + std::to_string(range_->to) + " with " +
              report::TraceSession::recorder_name());
  }
  step_range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (step_range_->isActive()) step_range_->before(("ProfilerStep#" + std::to_string(step)).c_str());
  open_step_ = step;
}

void StepProfiler::step_ends(int64_t step) {
  if (!session_ || step != open_step_) return;
  step_range_.reset();
  open_step_ = 0;
  last_ended_ = step;
  if (step == range_->to) write();
}

void StepProfiler::finish() {
  if (!session_) return;
  step_range_.reset();
  log::warn("training ended before step " + std::to_string(range_->to) + " of profile \"" +
            std::to_string(range_->from) + ":" + std::to_string(range_->to) +
            "\"; the trace holds the steps taken");
  write();
}

void StepProfiler::write() {
  std::unique_ptr<report::TraceSession> session = std::move(session_);
  done_ = true;
  session->save(path_);
  const std::string steps = last_ended_ >= first_step_ ? "steps " + std::to_string(first_step_) + " to " +
                                                             std::to_string(last_ended_)
                                                       : "no complete step";
  log::info("profile (" + steps + ") written to " + path_.string() +
            " (open it in https://ui.perfetto.dev or chrome://tracing)");
}

}  // namespace oml::pipelines
