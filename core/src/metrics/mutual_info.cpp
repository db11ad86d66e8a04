// NMI and AMI as scikit-learn 1.9 computes them (sklearn/metrics/cluster/_supervised.py and
// _expected_mutual_info_fast.pyx), term for term, so that the values agree to rounding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "oml/common/error.h"
#include "oml/metrics/clustering.h"

namespace oml::metrics {

namespace {

// The contingency table of two labellings: its non-zero cells and both margins.
struct Contingency {
  std::vector<int64_t> row_sums;                                               ///< items per label (a)
  std::vector<int64_t> column_sums;                                            ///< items per cluster (b)
  std::vector<std::pair<std::pair<std::size_t, std::size_t>, int64_t>> cells;  ///< (row, column) -> n_ij > 0
  int64_t n = 0;
};

Contingency contingency_of(const std::vector<int64_t>& labels, const std::vector<int64_t>& clusters) {
  OML_CHECK(labels.size() == clusters.size(), DataError, "mutual information of ", labels.size(),
            " labels and ", clusters.size(), " clusters");
  std::map<int64_t, std::size_t> row_of;
  std::map<int64_t, std::size_t> column_of;
  for (const int64_t label : labels) row_of.emplace(label, 0);
  for (const int64_t cluster : clusters) column_of.emplace(cluster, 0);
  std::size_t next = 0;
  for (auto& entry : row_of) entry.second = next++;
  next = 0;
  for (auto& entry : column_of) entry.second = next++;
  Contingency table;
  table.row_sums.assign(row_of.size(), 0);
  table.column_sums.assign(column_of.size(), 0);
  std::map<std::pair<std::size_t, std::size_t>, int64_t> cells;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::size_t row = row_of[labels[i]];
    const std::size_t column = column_of[clusters[i]];
    ++table.row_sums[row];
    ++table.column_sums[column];
    ++cells[{row, column}];
  }
  table.cells.assign(cells.begin(), cells.end());
  table.n = static_cast<int64_t>(labels.size());
  return table;
}

// sklearn's _entropy: -sum p log p over the counts, 0 for a single value.
double entropy(const std::vector<int64_t>& counts) {
  if (counts.size() == 1) return 0.0;
  double total = 0.0;
  for (const int64_t c : counts) total += static_cast<double>(c);
  double h = 0.0;
  for (const int64_t c : counts) {
    const double count = static_cast<double>(c);
    h -= (count / total) * (std::log(count) - std::log(total));
  }
  return h;
}

// sklearn's mutual_info_score from the contingency table (its terms below a double epsilon are
// zeroed, and the sum is clipped at 0, as there).
double mutual_info(const Contingency& table) {
  if (table.row_sums.size() == 1 || table.column_sums.size() == 1) return 0.0;
  const double total = static_cast<double>(table.n);
  const double log_total = std::log(total);
  double mi = 0.0;
  for (const auto& [cell, count] : table.cells) {
    const double nij = static_cast<double>(count);
    const double outer =
        static_cast<double>(table.row_sums[cell.first] * table.column_sums[cell.second]);  // int64 as sklearn
    const double p = nij / total;
    const double log_outer = -std::log(outer) + log_total + log_total;
    double term = p * (std::log(nij) - log_total) + p * log_outer;
    if (std::abs(term) < std::numeric_limits<double>::epsilon()) term = 0.0;
    mi += term;
  }
  return std::max(mi, 0.0);
}

// sklearn's expected_mutual_information: E[MI] over random labellings with these margins.
double expected_mutual_info(const Contingency& table) {
  const std::vector<int64_t>& a = table.row_sums;
  const std::vector<int64_t>& b = table.column_sums;
  if (a.size() == 1 || b.size() == 1) return 0.0;
  const int64_t n = table.n;
  const double n_d = static_cast<double>(n);
  const int64_t largest =
      std::max(*std::max_element(a.begin(), a.end()), *std::max_element(b.begin(), b.end()));
  // Indexed by n_ij; entry 0 is never used (sklearn sets it to 1 to avoid log(0)).
  std::vector<double> term1(static_cast<std::size_t>(largest) + 1);
  std::vector<double> log_n_nij(term1.size());
  std::vector<double> gln_nij(term1.size());
  const double gln_n = std::lgamma(n_d + 1.0);
  for (int64_t nij = 0; nij <= largest; ++nij) {
    const double value = nij == 0 ? 1.0 : static_cast<double>(nij);
    term1[nij] = value / n_d;
    log_n_nij[nij] = std::log(n_d) + std::log(value);
    gln_nij[nij] = std::lgamma(value + 1.0) + gln_n;
  }
  double emi = 0.0;
  for (const int64_t ai : a) {
    const double log_a = std::log(static_cast<double>(ai));
    const double gln_a = std::lgamma(static_cast<double>(ai) + 1.0);
    const double gln_na = std::lgamma(static_cast<double>(n - ai) + 1.0);
    for (const int64_t bj : b) {
      const double log_b = std::log(static_cast<double>(bj));
      const double gln_b = std::lgamma(static_cast<double>(bj) + 1.0);
      const double gln_nb = std::lgamma(static_cast<double>(n - bj) + 1.0);
      const int64_t start = std::max<int64_t>(1, ai - n + bj);
      const int64_t end = std::min(ai, bj) + 1;
      for (int64_t nij = start; nij < end; ++nij) {
        const double term2 = log_n_nij[nij] - log_a - log_b;
        const double gln = gln_a + gln_b + gln_na + gln_nb - gln_nij[nij] -
                           std::lgamma(static_cast<double>(ai - nij) + 1.0) -
                           std::lgamma(static_cast<double>(bj - nij) + 1.0) -
                           std::lgamma(static_cast<double>(n - ai - bj + nij) + 1.0);
        emi += term1[nij] * term2 * std::exp(gln);
      }
    }
  }
  return emi;
}

// A value kept at least one double epsilon away from 0 with its sign (sklearn's guard against
// 0 / 0 for a perfect match).
double away_from_zero(double value) {
  const double eps = std::numeric_limits<double>::epsilon();
  return value < 0 ? std::min(value, -eps) : std::max(value, eps);
}

}  // namespace

double normalized_mutual_info(const std::vector<int64_t>& labels, const std::vector<int64_t>& clusters) {
  const Contingency table = contingency_of(labels, clusters);
  const std::size_t classes = table.row_sums.size();
  if (classes == table.column_sums.size() && classes <= 1) return 1.0;
  const double mi = mutual_info(table);
  if (mi == 0.0) return 0.0;
  return mi / ((entropy(table.row_sums) + entropy(table.column_sums)) / 2.0);
}

double adjusted_mutual_info(const std::vector<int64_t>& labels, const std::vector<int64_t>& clusters) {
  const Contingency table = contingency_of(labels, clusters);
  const std::size_t classes = table.row_sums.size();
  const std::size_t clusters_count = table.column_sums.size();
  if (classes == clusters_count && classes <= 1) return 1.0;
  if (classes == 1 || clusters_count == 1) return 0.0;
  const double mi = mutual_info(table);
  const double emi = expected_mutual_info(table);
  const double normalizer = (entropy(table.row_sums) + entropy(table.column_sums)) / 2.0;
  return away_from_zero(mi - emi) / away_from_zero(normalizer - emi);
}

}  // namespace oml::metrics
