// mean_average_precision_at_r (docs/metrics.md, PML's AccuracyCalculator
// "mean_average_precision_at_r"): average precision over the first R retrieved, divided by R.
#include "builtin_metrics.h"
#include "oml/metrics/accuracy_calculator.h"

namespace oml::metrics::builtin {

bool parse_map_at_r(config::ArgsReader& args) { return read_switch(args, "mean_average_precision_at_r"); }

std::shared_ptr<Metric> build_map_at_r(const bool& on, const NoContext&) {
  return accuracy_calculator_metric("mean_average_precision_at_r", on, map_at_r);
}

}  // namespace oml::metrics::builtin
