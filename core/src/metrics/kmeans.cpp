// k-means for the clustering metrics (oml/metrics/clustering.h): Faiss's, as PML runs it. Only
// this file sees OML_HAVE_FAISS (core/CMakeLists.txt), like the Faiss retrieval backends.
#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/metrics/clustering.h"

#ifndef OML_HAVE_FAISS
#define OML_HAVE_FAISS 0
#endif

#if OML_HAVE_FAISS
#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#endif

namespace oml::metrics {

bool kmeans_available() { return OML_HAVE_FAISS != 0; }

std::vector<int64_t> kmeans_clusters(const at::Tensor& embeddings, int64_t num_clusters) {
  OML_CHECK(embeddings.defined() && embeddings.dim() == 2, DataError, "k-means needs a [N, D] matrix");
  const int64_t n = embeddings.size(0);
  const int64_t d = embeddings.size(1);
  OML_CHECK(num_clusters >= 1 && n >= num_clusters, DataError, "k-means into ", num_clusters,
            " clusters (the distinct labels) needs at least as many embeddings, got ", n);
#if OML_HAVE_FAISS
  // PML's FaissKMeans(niter=20) on float32 rows: faiss.Kmeans(d, k, niter=20).train(x), then
  // index.search(x, 1). Faiss's other defaults stay (seed 1234, nredo 1, at most 256 points per
  // centroid in the training sample), so the sample, the initial centroids and every iteration
  // are Faiss's own and the clusters are PML's.
  const at::Tensor x = embeddings.to(torch::kFloat32).contiguous();
  faiss::ClusteringParameters parameters;
  parameters.niter = 20;
  // Only a warning depends on it (fewer than 39 points per centroid); PML's runs print it to
  // stderr, ours say nothing.
  parameters.min_points_per_centroid = 1;
  faiss::Clustering clustering(static_cast<int>(d), static_cast<size_t>(num_clusters), parameters);
  faiss::IndexFlatL2 centroids(d);
  clustering.train(n, x.data_ptr<float>(), centroids);
  std::vector<float> distances(static_cast<std::size_t>(n));
  std::vector<faiss::Index::idx_t> nearest(static_cast<std::size_t>(n));
  centroids.search(n, x.data_ptr<float>(), 1, distances.data(), nearest.data());
  return std::vector<int64_t>(nearest.begin(), nearest.end());
#else
  throw SettingError(
      "metric_args",
      "nmi and ami cluster with Faiss's k-means, and this oml-cpp was built without Faiss; install "
      "libfaiss-dev (scripts/setup.sh) and rebuild");
#endif
}

}  // namespace oml::metrics
