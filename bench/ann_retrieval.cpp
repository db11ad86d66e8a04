// Validation with a retrieval backend (docs/benchmarks.md#approximate-k-nn-faiss-backends): cmc@1,5,10
// and map@5 of clustered random embeddings through compute_embedding_metrics, as oml-validate
// computes them, with the backend's recall@10 measured against exact search. Prints one JSON line.
//
// In memory, every item a query and a gallery item (the data of bench_retrieval: the generator of
// bench_support.h; --noise sets how tight the clusters are):
//   bench_ann_retrieval --n 1000000 --backend faiss_ivf [--args '{nprobe: 32}'] [--report-recall 1000]
// A gallery larger than memory, memory-mapped from a .npy (the last --queries rows are the
// queries, the others the gallery; labels in <file>.labels.npy), written once by --generate:
//   bench_ann_retrieval --npy /tmp/g.npy --n 10100000 --generate
//   bench_ann_retrieval --npy /tmp/g.npy --queries 100000 --backend faiss_ivf_pq --report-recall 200
#include <torch/torch.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>

#include "bench_support.h"
#include "benchmark.h"
#include "oml/common/runtime.h"
#include "oml/config/document.h"
#include "oml/io/mapped_file.h"
#include "oml/io/npy.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/metrics/metric_table.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "shell/components.h"

namespace ann_retrieval_benchmark {

namespace po = boost::program_options;
using oml::bench::clustered_embeddings;
using oml::bench::peak_rss_mb;

namespace {

// A float32 [n, dim] .npy written chunk by chunk (version 1.0 header), so that a file larger than
// memory can be generated.
void write_npy_streamed(const std::string& path, int64_t n, int64_t dim, int64_t classes, double noise) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ", " +
                       std::to_string(dim) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::ofstream out(path + ".tmp", std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  torch::Tensor labels;
  clustered_embeddings(n, dim, classes, noise, labels, [&](int64_t, const torch::Tensor& rows) {
    const torch::Tensor block = rows.contiguous();
    out.write(static_cast<const char*>(block.data_ptr()), static_cast<std::streamsize>(block.nbytes()));
  });
  out.close();
  if (!out) throw std::runtime_error("could not write " + path);
  std::rename((path + ".tmp").c_str(), path.c_str());
  oml::io::write_npy(path + ".labels.npy", labels);
}

}  // namespace

OML_BENCHMARK(ann_retrieval) {
  oml::tune_allocator();
  po::options_description options("bench_ann_retrieval options");
  int64_t n = 0, dim = 128, classes = 0, threads = 2, queries = 0, report_recall = 0;
  double noise = 1.5;
  std::string backend_name = "exact", backend_args = "{}", npy;
  // clang-format off
  options.add_options()
    ("help", "show this help")
    ("n", po::value(&n), "items (in memory), or rows to --generate")
    ("dim", po::value(&dim), "embedding dimension (128)")
    ("classes", po::value(&classes), "labels (default n / 5, like SOP)")
    ("noise", po::value(&noise), "noise around the class centres (1.5 = bench_retrieval's data)")
    ("backend", po::value(&backend_name), "retrieval backend (exact)")
    ("args", po::value(&backend_args), "its args as YAML ({})")
    ("report-recall", po::value(&report_recall), "queries whose exact top-10 measure the recall (0)")
    ("threads", po::value(&threads), "intra-op threads (2)")
    ("npy", po::value(&npy), "memory-mapped gallery + queries file")
    ("queries", po::value(&queries), "with --npy: the last Q rows are the queries")
    ("generate", "with --npy and --n: write the file (and its labels) and exit");
  // clang-format on
  po::variables_map vars;
  try {
    po::store(po::parse_command_line(argc, argv, options), vars);
    if (vars.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    po::notify(vars);
  } catch (const po::error& error) {
    std::cerr << "bench_ann_retrieval: " << error.what() << "\n";
    return 2;
  }
  torch::set_num_threads(static_cast<int>(threads));
  if (classes <= 0) classes = std::max<int64_t>(2, n / 5);

  if (vars.count("generate")) {
    write_npy_streamed(npy, n, dim, classes, noise);
    std::cout << "{\"generated\": \"" << npy << "\", \"n\": " << n << ", \"peak_rss_mb\": " << peak_rss_mb()
              << "}" << std::endl;
    return 0;
  }

  const auto start = std::chrono::steady_clock::now();
  oml::metrics::EmbeddingSet set;
  if (!npy.empty()) {
    set.embeddings = oml::io::map_npy_matrix(npy);
    const torch::Tensor labels = oml::io::read_npy(npy + ".labels.npy");
    n = set.embeddings.size(0);
    set.labels.assign(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n);
    set.is_query.assign(n, 0);
    set.is_gallery.assign(n, 1);
    for (int64_t i = n - queries; i < n; ++i) {
      set.is_query[i] = 1;
      set.is_gallery[i] = 0;
    }
  } else {
    torch::Tensor labels;
    torch::Tensor embeddings = torch::empty({n, dim});
    clustered_embeddings(n, dim, classes, noise, labels, [&](int64_t row, const torch::Tensor& rows) {
      embeddings.narrow(0, row, rows.size(0)).copy_(rows);
    });
    set.embeddings = embeddings;
    set.labels.assign(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n);
    set.is_query.assign(n, 1);
    set.is_gallery.assign(n, 1);
  }
  const double prepare_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  oml::cli::register_builtins();
  const auto document = oml::config::Document::from_string(
      "{name: " + backend_name + ", args: " + backend_args + "}", "bench_ann_retrieval --backend");
  oml::retrieval::BackendContext context;
  const auto backend = oml::registries().retrieval_backends.create(
      oml::config::parse_component(document.root(), "retrieval_backend"), context);
  oml::metrics::EmbeddingMetricsOptions metric_options;
  metric_options.metrics = oml::metrics::configure_metrics(
      oml::config::Document::from_string("{cmc_top_k: [1, 5, 10], precision_top_k: [], map_top_k: [5]}",
                                         "bench metric_args")
          .root());
  metric_options.backend = backend.get();
  metric_options.report_recall = report_recall;

  const auto search_start = std::chrono::steady_clock::now();
  const auto result = oml::metrics::compute_embedding_metrics(set, metric_options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();

  std::cout << "{\"n\": " << n << ", \"dim\": " << set.embeddings.size(1) << ", \"noise\": " << noise
            << ", \"backend\": \"" << backend->describe() << "\", \"args\": \"" << backend_args
            << "\", \"threads\": " << threads << ", \"mapped\": " << (npy.empty() ? "false" : "true")
            << ", \"prepare_s\": " << prepare_s << ", \"total_s\": " << seconds
            << ", \"peak_rss_mb\": " << peak_rss_mb();
  for (const auto& [key, value] : result.metrics) std::cout << ", \"" << key << "\": " << value;
  std::cout << "}" << std::endl;
  return 0;
}

}  // namespace ann_retrieval_benchmark
