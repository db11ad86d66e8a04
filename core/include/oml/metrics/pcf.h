#pragma once
// pcf@v (docs/metrics.md#pcfv): with the PCA explained-variance ratios of the embeddings (descending),
// the smallest number of components whose cumulative ratio exceeds v, divided by the
// embedding dimension. Computed from the D x D covariance (accumulated in double precision in
// row chunks), so memory does not grow with the number of embeddings.

#include <vector>

#include <ATen/core/Tensor.h>

namespace oml::metrics {

/// Explained-variance ratios, descending, D values summing to 1. Throws DataError for fewer
/// than 2 rows; all-equal rows (no variance) give NaN ratios.
std::vector<double> explained_variance_ratios(const at::Tensor& embeddings);

/// pcf for every v in `variance_fractions` (each within [0, 1]; ConfigError otherwise).
/// v = 1 (nothing can exceed it) gives 1.0: all components. [differs: OML may report
/// (rank + 1) / D there.] NaN when the embeddings have no variance.
std::vector<double> principal_components_fraction(const at::Tensor& embeddings,
                                                  const std::vector<double>& variance_fractions);

}  // namespace oml::metrics
