// r_precision (docs/metrics.md, PML's AccuracyCalculator "r_precision"): the relevant share of the
// first R retrieved, R = the query's relevant gallery items.
#include "builtin_metrics.h"
#include "oml/metrics/accuracy_calculator.h"

namespace oml::metrics::builtin {

bool parse_r_precision(config::ArgsReader& args) { return read_switch(args, "r_precision"); }

std::shared_ptr<Metric> build_r_precision(const bool& on, const NoContext&) {
  return accuracy_calculator_metric("r_precision", on, r_precision);
}

}  // namespace oml::metrics::builtin
