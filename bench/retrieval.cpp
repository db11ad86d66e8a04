// Validation cost of oml-cpp: self-retrieval on clustered random embeddings (every item is
// query and gallery), cmc@1,5, precision@5, map@5 and optionally fnmr@fmr 0.1 over all pairs.
// The data are generated exactly like ../shared/peer/validate_torch.py (same generator, same
// draws), so both programs report the same metric values. Prints one JSON line.
//
//   bench_retrieval --n 60000 --dim 128 [--fnmr] [--top-k 5] [--threads 2] [--budget-mb 128]
//                   [--queries M]   (only the first M items are queries; all N stay gallery)
#include <torch/torch.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>

#include "bench_support.h"
#include "benchmark.h"
#include "oml/common/runtime.h"
#include "oml/config/document.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/registry/registries.h"
#include "shell/components.h"

namespace retrieval_benchmark {

namespace po = boost::program_options;

namespace {

// The peer's data: bench_support.h's generator at noise 1.5. Up to 100k rows the noise is drawn
// in one call, as the figures recorded for those sizes were.
torch::Tensor clustered_embeddings(int64_t n, int64_t dim, int64_t classes, torch::Tensor& labels) {
  if (n <= 100000) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
    labels = torch::randint(0, classes, {n}, generator);
    const auto centres = torch::randn({classes, dim}, generator);
    return centres.index_select(0, labels) + 1.5 * torch::randn({n, dim}, generator);
  }
  auto embeddings = torch::empty({n, dim});
  oml::bench::clustered_embeddings(n, dim, classes, 1.5, labels,
                                   [&](int64_t start, const torch::Tensor& rows) {
                                     embeddings.narrow(0, start, rows.size(0)).copy_(rows);
                                   });
  return embeddings;
}

}  // namespace

OML_BENCHMARK(retrieval) {
  oml::tune_allocator();  // as every oml-* command does
  po::options_description options("bench_retrieval options");
  int64_t n = 0, dim = 128, classes = 0, threads = 2, top_k = 5, queries = 0;
  double budget_mb = 128;
  options.add_options()("help", "show this help")("n", po::value(&n)->required(), "number of items")(
      "dim", po::value(&dim), "embedding dimension (128)")("classes", po::value(&classes),
                                                           "number of labels (default n / 5, like SOP)")(
      "top-k", po::value(&top_k), "k of cmc/precision/map besides 1 and 5 (5)")(
      "fnmr", "also compute fnmr@fmr 0.1 over all pairs")(
      "threads", po::value(&threads), "intra-op threads (2)")("budget-mb", po::value(&budget_mb),
                                                              "distance block memory budget in MB (128)")(
      "queries", po::value(&queries), "use only the first M items as queries (default: all)");
  po::variables_map vars;
  try {
    po::store(po::parse_command_line(argc, argv, options), vars);
    if (vars.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    po::notify(vars);
  } catch (const po::error& error) {
    std::cerr << "bench_retrieval: " << error.what() << "\n" << options << "\n";
    return 2;
  }
  torch::set_num_threads(static_cast<int>(threads));
  if (classes <= 0) classes = std::max<int64_t>(2, n / 5);

  torch::Tensor labels;
  const torch::Tensor embeddings = clustered_embeddings(n, dim, classes, labels);
  oml::metrics::EmbeddingSet set;
  set.embeddings = embeddings;
  set.labels.assign(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n);
  set.is_query.assign(n, 1);
  if (queries > 0 && queries < n) std::fill(set.is_query.begin() + queries, set.is_query.end(), 0);
  set.is_gallery.assign(n, 1);

  oml::metrics::EmbeddingMetricsOptions metric_options;
  metric_options.memory_budget_mb = budget_mb;
  // The metrics as a config's `metric_args:` would ask for them.
  const std::string extra_k = top_k != 5 ? ", " + std::to_string(top_k) : "";
  const std::string metric_args = "{cmc_top_k: [1, 5" + extra_k + "], precision_top_k: [5" + extra_k +
                                  "], map_top_k: [5], fmr_vals: [" + (vars.count("fnmr") ? "0.1" : "") + "]}";
  oml::cli::register_builtins();
  metric_options.metrics = oml::metrics::configure_metrics(
      oml::config::Document::from_string(metric_args, "bench_retrieval metric_args").root());

  const auto start = std::chrono::steady_clock::now();
  const auto result = oml::metrics::compute_embedding_metrics(set, metric_options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << "{\"n\": " << n << ", \"dim\": " << dim
            << ", \"queries\": " << (queries > 0 ? std::min(queries, n) : n) << ", \"threads\": " << threads
            << ", \"budget_mb\": " << budget_mb << ", \"total_s\": " << seconds
            << ", \"peak_rss_mb\": " << oml::bench::peak_rss_mb();
  for (const auto& [key, value] : result.metrics) std::cout << ", \"" << key << "\": " << value;
  std::cout << "}" << std::endl;
  return 0;
}

}  // namespace retrieval_benchmark
