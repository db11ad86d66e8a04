#include "oml/metrics/pcf.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "oml/common/error.h"

namespace oml::metrics {

std::vector<double> explained_variance_ratios(const at::Tensor& embeddings) {
  OML_CHECK(embeddings.dim() == 2, DataError, "pcf: embeddings must be a [N, D] matrix, got ",
            embeddings.dim(), " dimensions");
  const int64_t n = embeddings.size(0);
  const int64_t dim = embeddings.size(1);
  OML_CHECK(n >= 2, DataError, "pcf: needs at least 2 embeddings, got ", n);
  at::NoGradGuard no_grad;
  // Two passes in double precision: the mean, then the centred scatter matrix, in chunks so
  // that a million embeddings never become a million-row double matrix.
  constexpr int64_t kChunk = 65536;
  at::Tensor mean = at::zeros({dim}, at::kDouble);
  for (int64_t start = 0; start < n; start += kChunk) {
    mean += embeddings.narrow(0, start, std::min(kChunk, n - start)).to(at::kDouble).sum(0);
  }
  mean /= static_cast<double>(n);
  at::Tensor scatter = at::zeros({dim, dim}, at::kDouble);
  for (int64_t start = 0; start < n; start += kChunk) {
    const at::Tensor centred =
        embeddings.narrow(0, start, std::min(kChunk, n - start)).to(at::kDouble) - mean;
    scatter.addmm_(centred.t(), centred);
  }
  const at::Tensor eigenvalues = at::linalg_eigvalsh(scatter).clamp_min(0.0).flip({0}).contiguous();
  const double total = eigenvalues.sum().item<double>();
  std::vector<double> ratios(static_cast<std::size_t>(dim));
  const double* values = eigenvalues.data_ptr<double>();
  for (int64_t i = 0; i < dim; ++i) {
    ratios[i] = total > 0.0 ? values[i] / total : std::numeric_limits<double>::quiet_NaN();
  }
  return ratios;
}

std::vector<double> principal_components_fraction(const at::Tensor& embeddings,
                                                  const std::vector<double>& variance_fractions) {
  for (const double v : variance_fractions) {
    if (!(v >= 0.0 && v <= 1.0))
      throw SettingError("metric_args.pcf_variance",
                         ::oml::detail::concat("values must be within [0, 1], got ", v));
  }
  const std::vector<double> ratios = explained_variance_ratios(embeddings);
  const auto dim = static_cast<int64_t>(ratios.size());
  std::vector<double> out;
  for (const double v : variance_fractions) {
    if (v >= 1.0) {  // no cumulative ratio exceeds 1: all components
      out.push_back(1.0);
      continue;
    }
    if (std::isnan(ratios.front())) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    // Components whose cumulative ratio is <= v, plus the one that crosses v.
    double cumulative = 0.0;
    int64_t components = 0;
    while (components < dim && cumulative + ratios[components] <= v) cumulative += ratios[components++];
    out.push_back(static_cast<double>(std::min(components + 1, dim)) / static_cast<double>(dim));
  }
  return out;
}

}  // namespace oml::metrics
