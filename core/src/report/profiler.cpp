// TraceSession: Kineto on LibTorch 2.x, the legacy autograd profiler on 1.13 (torch_compat.h
// names the difference; oml/report/profiler.h the contract).
#include "oml/report/profiler.h"

#include <cstdlib>
#include <sstream>
#include <string>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/io/atomic_file.h"
#include "torch_compat.h"

#if OML_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/autograd/profiler_kineto.h>
#else
#include <torch/csrc/autograd/profiler_legacy.h>
#endif

namespace oml::report {

namespace fs = std::filesystem;

#if OML_TORCH_AT_LEAST(2, 0)

namespace kineto = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

struct TraceSession::State {
  bool recording = false;
};

TraceSession::TraceSession(bool cuda) : state_(std::make_unique<State>()) {
  OML_CHECK(!impl::profilerEnabled(), RuntimeError, "a profiler is already recording on this thread");
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
  if (cuda) activities.insert(impl::ActivityType::CUDA);
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  state_->recording = true;
}

TraceSession::~TraceSession() {
  if (!state_->recording) return;
  try {
    kineto::disableProfiler();  // the result is dropped unwritten
  } catch (const std::exception& e) {
    log::warn(std::string("stopping the profiler failed: ") + e.what());
  }
}

void TraceSession::save(const fs::path& path) {
  OML_ASSERT(state_->recording, "a trace is saved once");
  state_->recording = false;
  const std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  try {
    io::write_path_atomic(path, [&](const fs::path& tmp) { result->save(tmp.string()); });
  } catch (const RuntimeError& e) {
    // Kineto reports its own write errors only in its log, which is quiet on a CPU run.
    throw RuntimeError("the profile could not be written to " + path.string() + " (" + e.what() +
                       "): the folder is not writable, or this LibTorch " + TORCH_VERSION +
                       " was built without Kineto");
  }
}

void prepare_profiler_process(bool cuda) {
  // Kineto reads its log level when it first starts (prepareProfiler); 5 is above its ERROR.
  if (!cuda) setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
}

const char* TraceSession::recorder_name() { return "Kineto"; }

#else  // LibTorch 1.13: RecordProfile writes the legacy profiler's events as a Chrome trace.

struct TraceSession::State {
  std::ostringstream trace;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> recorder;
};

TraceSession::TraceSession(bool /*cuda*/) : state_(std::make_unique<State>()) {
  OML_CHECK(!torch::autograd::profiler::profilerEnabled(), RuntimeError,
            "a profiler is already recording on this thread");
  state_->recorder = std::make_unique<torch::autograd::profiler::RecordProfile>(state_->trace);
}

TraceSession::~TraceSession() = default;  // RecordProfile's destructor stops it

void TraceSession::save(const fs::path& path) {
  OML_ASSERT(state_->recorder, "a trace is saved once");
  state_->recorder.reset();  // stops recording and writes the events into `trace`
  io::write_file_atomic(path, state_->trace.str());
}

void prepare_profiler_process(bool /*cuda*/) {}

const char* TraceSession::recorder_name() { return "the legacy autograd profiler"; }

#endif

}  // namespace oml::report
