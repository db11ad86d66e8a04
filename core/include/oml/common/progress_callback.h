#pragma once
// How long-running library work (k-NN retrieval, dataset conversion) reports progress without
// knowing how it is shown: the library calls the callback, the command decides whether that
// draws a bar, prints a line or does nothing (pipelines/runtime/progress.h).

#include <cstdint>
#include <functional>

namespace oml {

/// Called with the units done so far and the total (both in the caller's unit: queries,
/// images). May be called from worker threads, but never concurrently: callers serialise.
/// An empty function means "nobody is watching".
using ProgressCallback = std::function<void(int64_t done, int64_t total)>;

}  // namespace oml
