#pragma once
// The clustering metrics of pytorch-metric-learning's AccuracyCalculator, NMI and AMI
// (docs/metrics.md#nmi-and-ami): the embeddings are clustered by k-means into as many clusters
// as they have distinct labels, and the clusters are compared with the labels by scikit-learn's
// normalized_mutual_info_score / adjusted_mutual_info_score (arithmetic mean normaliser).
//
//   const std::vector<int64_t> clusters = kmeans_clusters(query_embeddings, num_labels);
//   double nmi = normalized_mutual_info(query_labels, clusters);

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace oml::metrics {

/// Whether this build has Faiss, whose k-means PML runs (kmeans_clusters needs it).
bool kmeans_available();

/// PML's FaissKMeans with AccuracyCalculator's arguments: Faiss's k-means (faiss::Clustering,
/// 20 iterations, seed 1234, one run, at most 256 points per centroid sampled for training) on
/// the float32 rows of `embeddings` [N, D], then each row's nearest centroid. Deterministic.
/// DataError when N < num_clusters; SettingError when the build has no Faiss.
std::vector<int64_t> kmeans_clusters(const at::Tensor& embeddings, int64_t num_clusters);

/// scikit-learn's normalized_mutual_info_score(labels, clusters): MI / ((H(labels) + H(clusters)) / 2),
/// 1 when both have a single value, 0 when MI is 0. Natural logarithms.
double normalized_mutual_info(const std::vector<int64_t>& labels, const std::vector<int64_t>& clusters);

/// scikit-learn's adjusted_mutual_info_score(labels, clusters):
/// (MI - E[MI]) / ((H(labels) + H(clusters)) / 2 - E[MI]) with E[MI] under the hypergeometric
/// model of random labellings with the same cluster sizes; 1 when both have a single value, 0
/// when only one of them has. O(classes × clusters × min size) for E[MI].
double adjusted_mutual_info(const std::vector<int64_t>& labels, const std::vector<int64_t>& clusters);

}  // namespace oml::metrics
