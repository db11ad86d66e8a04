// precision_at_1 (docs/metrics.md, PML's AccuracyCalculator "precision_at_1"): 1 when the nearest
// gallery item is relevant; over the queries with ground truth.
#include "builtin_metrics.h"
#include "oml/metrics/accuracy_calculator.h"

namespace oml::metrics::builtin {

bool parse_precision_at_1(config::ArgsReader& args) { return read_switch(args, "precision_at_1"); }

std::shared_ptr<Metric> build_precision_at_1(const bool& on, const NoContext&) {
  return accuracy_calculator_metric("precision_at_1", on, precision_at_1);
}

}  // namespace oml::metrics::builtin
