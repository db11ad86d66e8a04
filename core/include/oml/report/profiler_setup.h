#pragma once
// What a process that will record a profile (oml/report/profiler.h) sets up first. A header of
// its own so that a command can call it without LibTorch's headers.

namespace oml::report {

/// Call before the process starts threads (it changes the environment). Without `cuda`, Kineto's
/// probe for GPUs, which logs "gpuGetDeviceCount failed" as an ERROR on a machine without one,
/// is silenced (KINETO_LOG_LEVEL, unless the environment sets it). Nothing on LibTorch 1.13.
void prepare_profiler_process(bool cuda);

}  // namespace oml::report
