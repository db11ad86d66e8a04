#pragma once
// Registration of the built-in metrics (core/src/metrics/builtin/).

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::metrics {

/// Adds cmc, precision, map, fnmr and pcf to `registries.metrics`.
void register_builtin_metrics(Registries& registries);

}  // namespace oml::metrics
