#include "oml/metrics/embedding_metrics.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <unordered_map>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/distributed/process_group.h"
#include "oml/metrics/retrieval_metrics.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/distance_space.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/postprocessor.h"
#include "oml/retrieval/sharded_knn.h"

namespace oml::metrics {

namespace {

void check_rows(const EmbeddingSet& set) {
  OML_CHECK(set.embeddings.defined() && set.embeddings.dim() == 2, DataError,
            "validation embeddings must be a [N, D] matrix");
  const int64_t n = set.embeddings.size(0);
  OML_CHECK(n > 0, DataError, "no validation embeddings");
  auto check_size = [n](std::size_t size, const char* what, bool optional) {
    OML_CHECK((optional && size == 0) || static_cast<int64_t>(size) == n, DataError, "validation data: ", n,
              " embeddings but ", size, " ", what);
  };
  check_size(set.labels.size(), "labels", false);
  check_size(set.is_query.size(), "is_query flags", false);
  check_size(set.is_gallery.size(), "is_gallery flags", false);
  check_size(set.categories.size(), "categories", true);
  check_size(set.sequences.size(), "sequence ids", true);
  check_size(set.dataset_indices.size(), "dataset indices", true);
  OML_CHECK(std::any_of(set.is_query.begin(), set.is_query.end(), [](uint8_t v) { return v != 0; }),
            DataError, "validation data has no query rows (is_query is false everywhere)");
  OML_CHECK(std::any_of(set.is_gallery.begin(), set.is_gallery.end(), [](uint8_t v) { return v != 0; }),
            DataError, "validation data has no gallery rows (is_gallery is false everywhere)");
}

// The rows flagged in `mask`, as an ItemSet (no copy of the embeddings when every row is in).
retrieval::ItemSet select_rows(const EmbeddingSet& set, const std::vector<uint8_t>& mask,
                               const std::vector<int64_t>& sequence_ids, std::vector<int64_t>& rows) {
  rows.clear();
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) rows.push_back(static_cast<int64_t>(i));
  }
  retrieval::ItemSet items;
  if (static_cast<int64_t>(rows.size()) == set.embeddings.size(0)) {
    items.embeddings = set.embeddings;
  } else if (!rows.empty() && rows.back() - rows.front() + 1 == static_cast<int64_t>(rows.size())) {
    // One run of rows: a view, so a memory-mapped gallery is not copied.
    items.embeddings = set.embeddings.narrow(0, rows.front(), static_cast<int64_t>(rows.size()));
  } else {
    items.embeddings = set.embeddings.index_select(0, torch::tensor(rows, torch::kLong));
  }
  for (const int64_t row : rows) {
    items.labels.push_back(set.labels[row]);
    items.ids.push_back(set.dataset_indices.empty() ? row : set.dataset_indices[row]);
    if (!sequence_ids.empty()) items.sequences.push_back(sequence_ids[row]);
  }
  return items;
}

std::vector<int64_t> sequence_ids_of(const std::vector<std::string>& sequences) {
  std::vector<int64_t> ids;
  if (sequences.empty()) return ids;
  std::unordered_map<std::string, int64_t> id_of;
  ids.reserve(sequences.size());
  for (const auto& sequence : sequences) {
    if (sequence.empty()) {
      ids.push_back(-1);
      continue;
    }
    ids.push_back(id_of.emplace(sequence, static_cast<int64_t>(id_of.size())).first->second);
  }
  return ids;
}

// The most relevant gallery items any query has (ignored pairs excluded), counted from the
// labels before the retrieval: metrics that read every list down to R (map@R) need that many.
int64_t largest_ground_truth(const retrieval::ItemSet& queries, const retrieval::ItemSet& gallery) {
  const std::vector<int64_t> n_gt =
      retrieval::count_ground_truth(queries, gallery, retrieval::IgnoredPairs(queries, gallery));
  return n_gt.empty() ? 0 : *std::max_element(n_gt.begin(), n_gt.end());
}

}  // namespace

EmbeddingMetricsResult compute_embedding_metrics(const EmbeddingSet& set,
                                                 const EmbeddingMetricsOptions& options) {
  const MetricTable& table = options.metrics;
  const bool several_ranks = options.group != nullptr && options.group->size() > 1;
  const bool main_rank = options.group == nullptr || options.group->rank() == 0;
  // Metrics over all pairs (fnmr@fmr) need every block in one pass: then rank 0 computes alone
  // (and an approximate backend refuses them below). Otherwise every rank searches its share of
  // the queries — an approximate backend with its own index over the whole gallery.
  const bool exact = options.backend == nullptr || options.backend->exact();
  const bool split_knn = several_ranks && !table.needs_pair_pass();
  if (several_ranks && !split_knn && !main_rank) return {};
  check_rows(set);
  at::NoGradGuard no_grad;

  const std::vector<int64_t> sequence_ids = sequence_ids_of(set.sequences);
  std::vector<int64_t> query_rows;
  std::vector<int64_t> gallery_rows;
  // The engines search the vectors in which the configured distance is their measure's order.
  const retrieval::ItemSet queries =
      retrieval::to_engine_space(select_rows(set, set.is_query, sequence_ids, query_rows), options.distance);
  const retrieval::ItemSet gallery = retrieval::to_engine_space(
      select_rows(set, set.is_gallery, sequence_ids, gallery_rows), options.distance);
  retrieval::validate_item_set(queries, "query");
  retrieval::validate_item_set(gallery, "gallery");

  retrieval::KnnOptions knn;
  knn.memory_budget_mb = options.memory_budget_mb;
  knn.on_progress = options.on_progress;
  knn.measure = retrieval::engine_measure(options.distance);
  knn.top_k = table.required_top_k();
  if (options.postprocessor != nullptr)
    knn.top_k = std::max(knn.top_k, options.postprocessor->required_top_k());
  if (table.reads_to_max_ground_truth())
    knn.top_k = std::max(knn.top_k, largest_ground_truth(queries, gallery));

  // The pair passes keep references to these until the metrics are computed.
  std::optional<retrieval::detail::PreparedPair> pair;
  std::optional<retrieval::IgnoredPairs> ignored;
  std::vector<std::unique_ptr<PairPass>> passes(table.entries().size());
  std::vector<int64_t> n_gt;
  EmbeddingMetricsResult result;
  if (!exact) {
    if (table.needs_pair_pass()) {
      throw SettingError(
          "retrieval_backend",
          "fnmr@fmr needs the distances of all query-gallery pairs, which only retrieval_backend "
          "'exact' computes; the configured backend is '" +
              options.backend->name() +
              "' (use retrieval_backend: {name: exact}, or remove metric_args.fmr_vals)");
    }
    const retrieval::RetrievalBackend& backend = *options.backend;
    if (split_knn) {
      result.retrieval = retrieval::retrieve_sharded_by_queries(
          *options.group, queries, gallery, knn,
          [&backend](const retrieval::ItemSet& share, const retrieval::ItemSet& whole_gallery,
                     const retrieval::KnnOptions& share_options) {
            return backend.search(share, whole_gallery, share_options);
          });
    } else {
      result.retrieval = backend.search(queries, gallery, knn);
    }
    result.retrieval.check_consistent();
    if (options.report_recall > 0) {
      // Split too: every rank computes the exact lists of its share of the sampled queries.
      const retrieval::RecallEstimate recall =
          retrieval::measure_recall(result.retrieval, queries, gallery, knn, options.report_recall,
                                    options.recall_seed, split_knn ? options.group : nullptr);
      result.metrics[retrieval::recall_metric_key(recall.k)] = recall.recall;
      if (main_rank) {  // the same estimate on every rank: said once
        log::info(::oml::detail::concat("recall@", recall.k, " of ", backend.describe(), ": ", recall.recall,
                                        " (exact top-", recall.k, " of ", recall.queries,
                                        " random queries)"));
      }
    } else if (const auto tuned = backend.tuned_recall()) {
      // The recall target_recall reached (gallery items as queries), the same on every rank.
      result.metrics[retrieval::recall_metric_key(tuned->k)] = tuned->recall;
    }
  } else if (split_knn) {
    result.retrieval = retrieval::retrieve_knn_sharded(*options.group, queries, gallery, knn);
  } else {
    // One retrieval serves every metric; metrics over all pairs (fnmr@fmr) ride on its blocks.
    pair.emplace(queries, gallery, knn.measure);
    ignored.emplace(queries, gallery);
    std::vector<retrieval::detail::BlockConsumer*> consumers;
    if (table.needs_pair_pass()) {
      n_gt = retrieval::count_ground_truth(queries, gallery, *ignored);
      const PairPassInputs pair_inputs{
          *pair,          *ignored,
          queries.labels, gallery.labels,
          n_gt,           retrieval::choose_block_shape(pair->num_queries(), pair->num_gallery(), knn)};
      passes = table.start_pair_passes(pair_inputs);
      for (const auto& pass : passes) {
        if (pass) consumers.push_back(&pass->consumer());
      }
    }
    result.retrieval =
        retrieval::detail::retrieve_knn_fused(queries, gallery, *pair, *ignored, knn, consumers);
  }

  // From here on (postprocessor thresholds, metrics, reports) distances are the configured kind's.
  retrieval::convert_distances(result.retrieval, options.distance);
  if (options.postprocessor != nullptr) {
    result.retrieval = options.postprocessor->process(result.retrieval);
    result.retrieval.check_consistent();
  }

  const QueryHits hits = hits_of(result.retrieval);
  result.query_dataset_indices = queries.ids;
  result.queries_without_ground_truth =
      std::count(result.retrieval.n_gt.begin(), result.retrieval.n_gt.end(), int64_t{0});
  if (result.queries_without_ground_truth > 0 && main_rank) {  // said once, not by every rank
    log::warn(::oml::detail::concat(
        result.queries_without_ground_truth, " of ", queries.ids.size(),
        " queries have no ground truth in the gallery (no other gallery item with their label)"));
  }
  const bool per_category = !set.categories.empty() && !table.only_overall();
  const MetricInputs inputs{set, result.retrieval, hits, query_rows, per_category, nullptr};
  table.compute(inputs, passes, result.metrics, result.per_query);
  return result;
}

}  // namespace oml::metrics
