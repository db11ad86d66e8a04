#include "training/step_profiler.h"

#include <exception>
#include <string>

#include "oml/common/logging.h"
#include "oml/report/profiler.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

std::string range_text(const config::StepRange& range) {
  // Appended, not `"\"" + ...`: GCC 12 warns falsely (-Wrestrict) on a literal plus a string.
  std::string text(1, '"');
  text.append(std::to_string(range.from)).append(1, ':').append(std::to_string(range.to)).append(1, '"');
  return text;
}

}  // namespace

StepProfiler::StepProfiler(std::optional<config::StepRange> range, fs::path run_root, int64_t rank, bool cuda)
    : range_(range), cuda_(cuda) {
  if (range_) {
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

void StepProfiler::finish(int64_t steps_taken) {
  if (!range_ || done_) return;
  if (!session_) {
    log::warn("profile " + range_text(*range_) + ": training ended after step " +
              std::to_string(steps_taken) + ", before the range; nothing was recorded");
    done_ = true;
    return;
  }
  step_range_.reset();
  log::warn("training ended before step " + std::to_string(range_->to) + " of profile " +
            range_text(*range_) + "; the trace holds the steps taken");
  write();
}

void StepProfiler::write() {
  std::unique_ptr<report::TraceSession> session = std::move(session_);
  done_ = true;
  // A trace is a view of the run, not its result: a failed write is reported, training goes on.
  try {
    session->save(path_);
  } catch (const std::exception& e) {
    log::warn(e.what());
    return;
  }
  const std::string steps = last_ended_ >= first_step_ ? "steps " + std::to_string(first_step_) + " to " +
                                                             std::to_string(last_ended_)
                                                       : "no complete step";
  log::info("profile (" + steps + ") written to " + path_.string() +
            " (open it in https://ui.perfetto.dev or chrome://tracing)");
}

}  // namespace oml::pipelines
