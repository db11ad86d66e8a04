#pragma once
// Internal: target_recall (TuneOptions in options.h) — how the search parameters that it
// chooses are searched. FaissBackend::tune (tuning.cpp) measures the recall; each kind names its
// knobs (FaissBackend::knobs).

#include <cstdint>
#include <functional>

namespace oml::retrieval::detail {

/// A search parameter target_recall chooses: its name, the range searched, how a value is applied
/// (to the built index, or to the re-ranking factor).
struct Knob {
  const char* name;
  int64_t low;
  int64_t high;
  std::function<void(int64_t)> set;
};

/// What raise_until() left set.
struct Raised {
  int64_t value = 0;    ///< the value left set
  double recall = 0.0;  ///< the recall at it
};

/// Leaves `knob` at the smallest value in [low, high] whose recall() reaches `target` — doubling
/// from `low`, then halving the gap down to 1/16 of the value (recall rises with each of these
/// parameters; the last 6 % are not worth more searches) — or at `high` when none does.
Raised raise_until(const Knob& knob, double target, const std::function<double()>& recall);

}  // namespace oml::retrieval::detail
