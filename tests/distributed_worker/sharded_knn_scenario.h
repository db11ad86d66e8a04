#pragma once
// The "sharded_knn" scenario of oml_ddp_worker and the test that checks it
// and of its "sharded_backend" scenario (an approximate backend split by queries), with the test
// that checks them (tests/integration/sharded_knn_tests.cpp): inputs every rank builds alike, and
// a text of the results exact to the last bit, so that a rank's output can be compared with one
// process's.

#include <torch/torch.h>

#include <iomanip>
#include <sstream>
#include <string>
#include <utility>

#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/sharded_knn.h"
#include "shell/components.h"

namespace oml::test::ddp {

/// Small integer coordinates: many equal distances, so the order of ties is tested too.
inline at::Tensor tied_embeddings(int64_t n, int64_t dim, uint64_t seed) {
  const auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(0, 3, {n, dim}, generator).to(torch::kFloat);
}

/// Queries and gallery of the retrieval part: 301 gallery items with sequences; the queries are
/// every second gallery item from 100 on (they must not retrieve themselves) and 20 of their own.
inline std::pair<retrieval::ItemSet, retrieval::ItemSet> sharded_knn_items() {
  retrieval::ItemSet gallery, queries;
  const int64_t n = 301, extra = 20;
  const at::Tensor embeddings = tied_embeddings(n + extra, 6, 23);
  gallery.embeddings = embeddings.narrow(0, 0, n);
  std::vector<int64_t> query_rows;
  for (int64_t i = 0; i < n + extra; ++i) {
    const int64_t label = (i * 7) % 13, id = 5 + 2 * i, sequence = i % 4 == 0 ? -1 : (i / 3) % 17;
    if (i < n) {
      gallery.labels.push_back(label);
      gallery.ids.push_back(id);
      gallery.sequences.push_back(sequence);
    }
    if ((i >= 100 && i < n && i % 2 == 0) || i >= n) {
      query_rows.push_back(i);
      queries.labels.push_back(label);
      queries.ids.push_back(id);
      queries.sequences.push_back(sequence);
    }
  }
  queries.embeddings = embeddings.index_select(0, torch::tensor(query_rows, torch::kLong));
  return {queries, gallery};
}

inline retrieval::KnnOptions sharded_knn_options() {
  retrieval::KnnOptions options;
  options.top_k = 7;
  options.query_chunk = 16;
  options.gallery_tile = 32;
  return options;
}

/// Validation rows of the metrics part: query-only, gallery-only and both, categories, sequences.
inline metrics::EmbeddingSet sharded_knn_rows() {
  const int64_t n = 299;
  metrics::EmbeddingSet set;
  set.embeddings = tied_embeddings(n, 5, 29);
  for (int64_t i = 0; i < n; ++i) {
    set.labels.push_back((i * 5) % 11);
    set.is_query.push_back(i % 5 != 4);
    set.is_gallery.push_back(i % 7 != 3);
    // std::string(...).append: GCC 12 warns (falsely, -Wstringop-overflow) on "literal" + string here.
    set.categories.push_back(std::string("category ").append(std::to_string(i % 3)));
    set.sequences.push_back(i % 4 == 0 ? std::string()
                                       : std::string("s").append(std::to_string((i / 3) % 23)));
    set.dataset_indices.push_back(1000 + i);
  }
  return set;
}

/// `metric_args:` of the metrics part; with `fnmr`, also fnmr@fmr (all pairs: no split); with
/// `pml`, PML's k-NN metrics (their lists reach max R, so k is then max R rather than 10).
inline config::Node sharded_knn_metric_args(bool fnmr, bool pml = true) {
  const std::string yaml =
      std::string("metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5, 10]") +
      (pml ? ", mean_average_precision_at_r: true, r_precision: true, mrr: true, precision_at_1: true" : "") +
      (fnmr ? ", fmr_vals: [0.1, 0.5]" : "") + "}\n";
  return config::Document::from_string(yaml, "sharded_knn.yaml").root()["metric_args"];
}

/// Lists, distances (hexadecimal: every bit), ground truth, labels and ids.
inline std::string dump(const retrieval::RetrievalResults& results) {
  std::ostringstream out;
  out << std::hexfloat;
  for (int64_t q = 0; q < results.num_queries(); ++q) {
    out << "query " << results.query_ids[q] << " label " << results.query_labels[q] << " n_gt "
        << results.n_gt[q] << ":";
    for (int64_t j = results.begin(q); j < results.end(q); ++j) {
      out << " " << results.gallery_ids[results.retrieved[j]] << "@" << results.distances[j];
    }
    out << "\n";
  }
  return out.str();
}

/// Every metric and per-query value at full precision, then the lists.
inline std::string dump(const metrics::EmbeddingMetricsResult& result) {
  std::ostringstream out;
  out << std::setprecision(17);
  for (const auto& [key, value] : result.metrics) out << key << " " << value << "\n";
  for (const auto& [key, values] : result.per_query) {
    out << key << ":";
    for (const double value : values) out << " " << value;
    out << "\n";
  }
  out << "without ground truth " << result.queries_without_ground_truth << "\n";
  return out.str() + dump(result.retrieval);
}

/// The retrieval backend `name` of the "sharded_backend" scenario, with args that fit its small
/// sets (IVF-PQ codebooks of 2^6 entries: the metrics part has 256 gallery rows).
inline std::shared_ptr<retrieval::RetrievalBackend> sharded_backend(const std::string& name) {
  oml::cli::register_builtins();
  const std::string args = name == "faiss_ivf_pq" ? ", args: {nbits: 6}" : "";
  const auto document =
      config::Document::from_string("{name: " + name + args + "}\n", "sharded_backend.yaml");
  return registries().retrieval_backends.create(config::parse_component(document.root(), "retrieval_backend"),
                                                {});
}

/// What the "sharded_backend" scenario writes: the backend's lists of sharded_knn_items() and the
/// metrics of sharded_knn_rows() with its recall on 40 queries — split over `group` when given,
/// else in this process alone (the expected text).
inline std::string sharded_backend_output(const retrieval::RetrievalBackend& backend,
                                          distributed::ProcessGroup* group) {
  const auto [queries, gallery] = sharded_knn_items();
  const retrieval::KnnOptions options = sharded_knn_options();
  const retrieval::RetrievalResults lists =
      group == nullptr ? backend.search(queries, gallery, options)
                       : retrieval::retrieve_sharded_by_queries(
                             *group, queries, gallery, options,
                             [&backend](const retrieval::ItemSet& q, const retrieval::ItemSet& g,
                                        const retrieval::KnnOptions& o) { return backend.search(q, g, o); });
  metrics::EmbeddingMetricsOptions metric_options;
  // Without PML's metrics: the recall is measured at the lists' k, 10.
  metric_options.metrics = metrics::configure_metrics(sharded_knn_metric_args(false, false));
  metric_options.backend = &backend;
  metric_options.report_recall = 40;
  metric_options.group = group;
  return "lists\n" + dump(lists) + "metrics\n" +
         dump(metrics::compute_embedding_metrics(sharded_knn_rows(), metric_options));
}

}  // namespace oml::test::ddp
