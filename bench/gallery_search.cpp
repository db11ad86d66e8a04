// bench_gallery_search: one query at a time against a saved-index-sized gallery, as oml-serve
// searches a lone request (docs/benchmarks.md#serving). A `faiss_ivf` GalleryIndex over N x D
// clustered embeddings (the data of bench_retrieval) is built once; then, alternately in rounds:
//   kept      — index->search of 1 query: the index keeps its lists' scan (their items' norms)
//               from build to the next add/remove;
//   norms     — making that scan (InvertedListScanner over the same N x D items): what every
//               search paid before the index kept it, on top of `kept`;
//   faiss     — the same lists searched by Faiss's own vector-by-vector scan (`scan: faiss`).
// Prints one JSON line per round (medians) and a summary: the median of the rounds' medians and
// the fastest single timing of each; per_search_before_ms = kept + norms.
//
//   bench_gallery_search [--n 60000] [--dim 128] [--nlist 490] [--nprobe 16] [--queries 200] [--rounds 5]
#include <torch/torch.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "bench_support.h"
#include "benchmark.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/detail/inverted_list_scan.h"
#include "oml/retrieval/gallery_index.h"
#include "shell/components.h"

namespace gallery_search_benchmark {

namespace po = boost::program_options;
namespace retrieval = oml::retrieval;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The median and the fastest of some timings: on a machine other jobs load, the fastest is what
// the work costs when it gets the cores; the median what it costs there.
struct Timing {
  double median_ms = 0.0;
  double min_ms = 0.0;
};

Timing timing(const std::vector<double>& ms) { return {median(ms), *std::min_element(ms.begin(), ms.end())}; }

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

std::unique_ptr<retrieval::GalleryIndex> build(const std::string& yaml, const retrieval::ItemSet& gallery) {
  static std::vector<oml::config::Document> documents;  // a spec points into its document
  static std::vector<std::shared_ptr<retrieval::RetrievalBackend>> backends;  // outlive their indexes
  documents.push_back(oml::config::Document::from_string(yaml, "bench.yaml"));
  backends.push_back(oml::registries().retrieval_backends.create(
      oml::config::parse_component(documents.back().root(), "retrieval_backend"), {}));
  const auto& backend = backends.back();
  retrieval::KnnOptions options;
  options.top_k = 10;
  return backend->build_index(gallery, options);
}

// One search of each query alone.
Timing per_query_ms(const retrieval::GalleryIndex& index, const at::Tensor& queries) {
  std::vector<double> times;
  retrieval::KnnOptions options;
  options.top_k = 10;
  for (int64_t q = 0; q < queries.size(0); ++q) {
    retrieval::ItemSet one;
    one.embeddings = queries.narrow(0, q, 1).contiguous();
    one.labels = {-1};
    one.ids = {-1};
    const auto start = Clock::now();
    const auto found = index.search(one, options);
    times.push_back(ms_since(start));
    if (found.size(0) != 10) throw std::runtime_error("a query found fewer than 10 items");
  }
  return timing(times);
}

// Making the scan of `gallery` in `nlist` lists (each list a contiguous block of rows:
// the cost is the items' norms, whatever the partition).
Timing norms_ms(const at::Tensor& gallery, int64_t nlist, int reps) {
  const int64_t n = gallery.size(0);
  const int64_t dim = gallery.size(1);
  std::vector<int64_t> positions(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<std::size_t>(i)] = i;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    std::vector<retrieval::detail::InvertedList> lists;
    for (int64_t l = 0; l < nlist; ++l) {
      const int64_t begin = n * l / nlist;
      const int64_t end = n * (l + 1) / nlist;
      lists.push_back({end - begin, gallery.data_ptr<float>() + begin * dim, positions.data() + begin});
    }
    const retrieval::detail::InvertedListScanner scanner(std::move(lists), dim);
    times.push_back(ms_since(start));
    if (scanner.num_lists() != nlist) throw std::runtime_error("lists lost");
  }
  return timing(times);
}

}  // namespace

OML_BENCHMARK(gallery_search) {
  po::options_description options("bench_gallery_search");
  // clang-format off
  options.add_options()
    ("n", po::value<int64_t>()->default_value(60000), "gallery items")
    ("dim", po::value<int64_t>()->default_value(128), "dimension (the default conv_net's 128)")
    ("nlist", po::value<int64_t>()->default_value(490), "IVF lists (oml-index's choice for 60k)")
    ("nprobe", po::value<int64_t>()->default_value(16), "lists probed")
    ("queries", po::value<int64_t>()->default_value(200), "single-query searches per round and variant")
    ("rounds", po::value<int>()->default_value(5), "rounds of the three variants");
  // clang-format on
  po::variables_map vars;
  po::store(po::parse_command_line(argc, argv, options), vars);
  po::notify(vars);
  const int64_t n = vars["n"].as<int64_t>();
  const int64_t dim = vars["dim"].as<int64_t>();
  const int64_t nlist = vars["nlist"].as<int64_t>();
  const int64_t nprobe = vars["nprobe"].as<int64_t>();
  const int64_t nq = vars["queries"].as<int64_t>();
  const int rounds = vars["rounds"].as<int>();
  oml::cli::register_builtins();

  retrieval::ItemSet gallery;
  torch::Tensor labels;
  std::vector<torch::Tensor> chunks;
  oml::bench::clustered_embeddings(n + nq, dim, std::max<int64_t>(1, n / 10), 0.5, labels,
                                   [&](int64_t, const torch::Tensor& rows) { chunks.push_back(rows); });
  const torch::Tensor all = torch::cat(chunks).contiguous();
  gallery.embeddings = all.narrow(0, 0, n).contiguous();
  for (int64_t i = 0; i < n; ++i) {
    gallery.labels.push_back(labels[i].item<int64_t>());
    gallery.ids.push_back(i);
  }
  const torch::Tensor queries = all.narrow(0, n, nq).contiguous();
  const std::string args = "nlist: " + std::to_string(nlist) + ", nprobe: " + std::to_string(nprobe);
  const auto blas = build("{name: faiss_ivf, args: {" + args + "}}", gallery);
  const auto faiss = build("{name: faiss_ivf, args: {" + args + ", scan: faiss}}", gallery);

  std::vector<Timing> kept, norms, own;
  for (int r = 0; r < rounds; ++r) {
    kept.push_back(per_query_ms(*blas, queries));
    norms.push_back(norms_ms(gallery.embeddings, nlist, 20));
    own.push_back(per_query_ms(*faiss, queries));
    std::printf(
        "{\"round\": %d, \"kept_ms\": %.4f, \"norms_ms\": %.4f, \"faiss_scan_ms\": %.4f, \"load\": \"%s\"}\n",
        r + 1, kept.back().median_ms, norms.back().median_ms, own.back().median_ms, load_average().c_str());
    std::fflush(stdout);
  }
  // Over the rounds: the median of the rounds' medians, and the fastest single timing.
  const auto summary = [](const std::vector<Timing>& rounds_of) {
    std::vector<double> medians, mins;
    for (const Timing& t : rounds_of) medians.push_back(t.median_ms), mins.push_back(t.min_ms);
    return Timing{median(medians), *std::min_element(mins.begin(), mins.end())};
  };
  const Timing k = summary(kept), m = summary(norms), f = summary(own);
  std::printf(
      "{\"n\": %lld, \"dim\": %lld, \"nlist\": %lld, \"nprobe\": %lld, \"median\": {\"kept_ms\": %.4f, "
      "\"norms_ms\": %.4f, \"per_search_before_ms\": %.4f, \"before_over_kept\": %.2f, \"faiss_scan_ms\": "
      "%.4f, "
      "\"kept_over_faiss_scan\": %.2f}, \"fastest\": {\"kept_ms\": %.4f, \"norms_ms\": %.4f, "
      "\"per_search_before_ms\": %.4f, \"before_over_kept\": %.2f, \"faiss_scan_ms\": %.4f, "
      "\"kept_over_faiss_scan\": %.2f}}\n",
      static_cast<long long>(n), static_cast<long long>(dim), static_cast<long long>(nlist),
      static_cast<long long>(nprobe), k.median_ms, m.median_ms, k.median_ms + m.median_ms,
      (k.median_ms + m.median_ms) / k.median_ms, f.median_ms, k.median_ms / f.median_ms, k.min_ms, m.min_ms,
      k.min_ms + m.min_ms, (k.min_ms + m.min_ms) / k.min_ms, f.min_ms, k.min_ms / f.min_ms);
  return 0;
}

}  // namespace gallery_search_benchmark
