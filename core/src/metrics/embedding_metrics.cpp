#include "oml/metrics/embedding_metrics.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/metrics/detail/pair_statistics.h"
#include "oml/metrics/pcf.h"
#include "oml/metrics/retrieval_metrics.h"
#include "oml/retrieval/detail/distance_blocks.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/postprocessor.h"

namespace oml::metrics {

std::string format_key_number(double value) {
  char text[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

namespace {

constexpr const char* kOverall = "OVERALL";

void check_metric_args(const config::MetricArgs& args) {
  auto check_ks = [](const std::vector<int64_t>& ks, const char* key) {
    for (const int64_t k : ks) {
      OML_CHECK(k > 0, ConfigError, "metric_args.", key, ": values must be positive integers, got ", k);
    }
  };
  check_ks(args.cmc_top_k, "cmc_top_k");
  check_ks(args.precision_top_k, "precision_top_k");
  check_ks(args.map_top_k, "map_top_k");
  for (const double v : args.fmr_vals) {
    OML_CHECK(v >= 0.0 && v <= 1.0, ConfigError, "metric_args.fmr_vals: values must be within [0, 1], got ",
              v);
  }
  for (const double v : args.pcf_variance) {
    OML_CHECK(v >= 0.0 && v <= 1.0, ConfigError,
              "metric_args.pcf_variance: values must be within [0, 1], got ", v);
  }
}

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

double mean_of(const std::vector<double>& values, const std::vector<int64_t>& which) {
  double sum = 0.0;
  for (const int64_t i : which) sum += values[i];
  return which.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(which.size());
}

}  // namespace

EmbeddingMetricsResult compute_embedding_metrics(const EmbeddingSet& set,
                                                 const EmbeddingMetricsOptions& options) {
  const config::MetricArgs& args = options.args;
  check_metric_args(args);
  check_rows(set);
  at::NoGradGuard no_grad;

  const std::vector<int64_t> sequence_ids = sequence_ids_of(set.sequences);
  std::vector<int64_t> query_rows;
  std::vector<int64_t> gallery_rows;
  const retrieval::ItemSet queries = select_rows(set, set.is_query, sequence_ids, query_rows);
  const retrieval::ItemSet gallery = select_rows(set, set.is_gallery, sequence_ids, gallery_rows);
  retrieval::validate_item_set(queries, "query");
  retrieval::validate_item_set(gallery, "gallery");

  retrieval::KnnOptions knn;
  knn.memory_budget_mb = options.memory_budget_mb;
  knn.on_progress = options.on_progress;
  knn.top_k = 1;
  for (const auto* ks : {&args.cmc_top_k, &args.precision_top_k, &args.map_top_k}) {
    for (const int64_t k : *ks) knn.top_k = std::max(knn.top_k, k);
  }
  if (options.postprocessor != nullptr)
    knn.top_k = std::max(knn.top_k, options.postprocessor->required_top_k());

  const retrieval::detail::PreparedPair pair(queries, gallery);
  const retrieval::IgnoredPairs ignored(queries, gallery);
  EmbeddingMetricsResult result;
  std::vector<double> fnmr;
  if (!args.fmr_vals.empty()) {
    // fnmr@fmr needs every pair: its first pass rides on the retrieval's blocks.
    const std::vector<int64_t> n_gt = retrieval::count_ground_truth(queries, gallery, ignored);
    detail::PairStatistics pairs(pair, ignored, queries.labels, gallery.labels, n_gt, args.fmr_vals);
    result.retrieval =
        retrieval::detail::retrieve_knn_fused(queries, gallery, pair, ignored, knn, {&pairs.first_pass()});
    fnmr = pairs.finish(retrieval::choose_block_shape(pair.num_queries(), pair.num_gallery(), knn));
    if (pairs.num_positive() == 0) log::warn("fnmr@fmr is NaN: there are no positive (same-label) pairs");
    if (pairs.num_negative() == 0)
      log::warn("fnmr@fmr is NaN: there are no negative (different-label) pairs");
  } else {
    result.retrieval = retrieval::detail::retrieve_knn_fused(queries, gallery, pair, ignored, knn, {});
  }
  if (options.postprocessor != nullptr) {
    result.retrieval = options.postprocessor->process(result.retrieval);
    result.retrieval.check_consistent();
  }

  const QueryHits hits = hits_of(result.retrieval);
  for (const int64_t k : args.cmc_top_k) result.per_query["cmc/" + std::to_string(k)] = cmc_at_k(hits, k);
  for (const int64_t k : args.precision_top_k) {
    result.per_query["precision/" + std::to_string(k)] = precision_at_k(hits, k);
  }
  for (const int64_t k : args.map_top_k) result.per_query["map/" + std::to_string(k)] = map_at_k(hits, k);
  result.query_dataset_indices = queries.ids;
  result.queries_without_ground_truth =
      std::count(result.retrieval.n_gt.begin(), result.retrieval.n_gt.end(), int64_t{0});
  if (result.queries_without_ground_truth > 0) {
    log::warn(::oml::detail::concat(
        result.queries_without_ground_truth, " of ", queries.ids.size(),
        " queries have no ground truth in the gallery (no other gallery item with their label)"));
  }

  // Queries per category; "OVERALL" holds them all.
  std::map<std::string, std::vector<int64_t>> groups;
  auto& everyone = groups[kOverall];
  for (std::size_t q = 0; q < query_rows.size(); ++q) {
    everyone.push_back(static_cast<int64_t>(q));
    if (!set.categories.empty() && !args.return_only_overall_category) {
      groups[set.categories[query_rows[q]]].push_back(static_cast<int64_t>(q));
    }
  }
  for (const auto& [category, members] : groups) {
    for (const auto& [name, values] : result.per_query)
      result.metrics[category + "/" + name] = mean_of(values, members);
  }
  for (std::size_t f = 0; f < fnmr.size(); ++f) {
    result.metrics[std::string(kOverall) + "/fnmr@fmr/" + format_key_number(args.fmr_vals[f])] = fnmr[f];
  }

  if (!args.pcf_variance.empty()) {
    auto add_pcf = [&](const std::string& category, const at::Tensor& embeddings) {
      const std::vector<double> pcf = principal_components_fraction(embeddings, args.pcf_variance);
      for (std::size_t i = 0; i < pcf.size(); ++i) {
        result.metrics[category + "/pcf/" + format_key_number(args.pcf_variance[i])] = pcf[i];
      }
    };
    OML_CHECK(set.embeddings.size(0) >= 2, DataError, "pcf needs at least 2 embeddings, got ",
              set.embeddings.size(0));
    add_pcf(kOverall, set.embeddings);
    if (!set.categories.empty() && !args.return_only_overall_category) {
      std::map<std::string, std::vector<int64_t>> rows_of;
      for (std::size_t i = 0; i < set.categories.size(); ++i)
        rows_of[set.categories[i]].push_back(static_cast<int64_t>(i));
      for (const auto& [category, rows] : rows_of) {
        if (rows.size() < 2) {
          log::warn("pcf for category '" + category + "' skipped: it has a single embedding");
          continue;
        }
        add_pcf(category, set.embeddings.index_select(0, torch::tensor(rows, torch::kLong)));
      }
    }
  }
  return result;
}

}  // namespace oml::metrics
