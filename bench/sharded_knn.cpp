// bench_sharded_knn: the k-NN phase of validation under DDP (docs/benchmarks.md, "Exact k-NN
// split over the ranks"): rank 0 searching everything while the others wait, against the search
// split over the ranks by queries and by gallery — measured alternately in one run (round 1:
// rank0, queries, gallery; round 2: the same; ...), on the same data. With --backend B (a
// retrieval backend, docs/metrics.md) rank0 is B's search on rank 0 and queries is B split by
// queries (every rank builds B's index over the whole gallery); gallery is exact only.
//
//   OPENBLAS_NUM_THREADS=1 bench_sharded_knn --nproc-per-node 2 --n 200000 --dim 128 --threads 1
//       [--top-k 5] [--rounds 2] [--variants rank0,queries,gallery] [--backend exact]
//
// Every item is query and gallery (self excluded), clustered like bench_retrieval's data. Each
// timing runs from a barrier to a barrier, so it is the slowest rank's. Rank 0 prints one line
// per measurement with the CPU time of the busiest rank (on a machine whose cores other jobs
// share, wall time can only follow where CPU time is free), whether each split's lists equal
// rank 0's alone (they must, bit for bit), the load average, and the medians.
#include <torch/torch.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>

#include "benchmark.h"
#include "oml/common/runtime.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/distributed/process_group.h"
#include "oml/distributed/world.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/sharded_knn.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "shell/launch.h"

namespace sharded_knn_benchmark {

namespace po = boost::program_options;
namespace dist = oml::distributed;
namespace retrieval = oml::retrieval;

namespace {

struct Args {
  int64_t n = 200000, dim = 128, top_k = 5, threads = 1, rounds = 2;
  std::string variants = "rank0,queries,gallery";
  std::string backend = "exact";
};
Args args;

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Labels ~ U{0..n/5-1}, embedding = centre[label] + 1.5 N(0, I): the same on every rank (seeded).
retrieval::ItemSet clustered_items(int64_t n, int64_t dim) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  const int64_t classes = std::max<int64_t>(2, n / 5);
  const torch::Tensor labels = torch::randint(0, classes, {n}, generator);
  const torch::Tensor centres = torch::randn({classes, dim}, generator);
  retrieval::ItemSet items;
  items.embeddings = centres.index_select(0, labels) + 1.5 * torch::randn({n, dim}, generator);
  items.labels.assign(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n);
  for (int64_t i = 0; i < n; ++i) items.ids.push_back(i);
  return items;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five;
  file >> one >> five;
  return one + " " + five;
}

bool same_lists(const retrieval::RetrievalResults& a, const retrieval::RetrievalResults& b) {
  return a.offsets == b.offsets && a.retrieved == b.retrieved && a.distances == b.distances &&
         a.n_gt == b.n_gt;
}

std::shared_ptr<retrieval::RetrievalBackend> make_backend(const std::string& name) {
  oml::cli::register_builtins();
  const auto document = oml::config::Document::from_string("{name: " + name + "}\n", "--backend");
  return oml::registries().retrieval_backends.create(
      oml::config::parse_component(document.root(), "retrieval_backend"), {});
}

int run(dist::ProcessGroup& group) {
  const retrieval::ItemSet items = clustered_items(args.n, args.dim);
  const std::shared_ptr<retrieval::RetrievalBackend> backend = make_backend(args.backend);
  const auto search = [&backend](const retrieval::ItemSet& queries, const retrieval::ItemSet& gallery,
                                 const retrieval::KnnOptions& options) {
    return backend->search(queries, gallery, options);
  };
  retrieval::KnnOptions options;
  options.top_k = args.top_k;
  std::vector<std::string> variants;
  for (std::size_t start = 0; start <= args.variants.size();) {
    const std::size_t comma = std::min(args.variants.find(',', start), args.variants.size());
    variants.push_back(args.variants.substr(start, comma - start));
    start = comma + 1;
  }
  const bool main = group.rank() == 0;
  if (main) {
    std::printf(
        "k-NN (%s) of %lld x %lld float32, every item query and gallery, top-%lld, %d ranks x %lld threads\n",
        backend->describe().c_str(), static_cast<long long>(args.n), static_cast<long long>(args.dim),
        static_cast<long long>(args.top_k), group.size(), static_cast<long long>(args.threads));
  }
  std::map<std::string, std::vector<double>> times;
  retrieval::RetrievalResults reference;  // rank 0 alone, the first time
  for (int64_t round = 1; round <= args.rounds; ++round) {
    for (const std::string& variant : variants) {
      group.barrier();
      const auto start = Clock::now();
      const double cpu_start = process_cpu_seconds();
      retrieval::RetrievalResults result;
      if (variant == "rank0") {
        if (main) result = backend->search(items, items, options);  // the others wait
      } else if (variant == "queries" && !backend->exact()) {
        result = retrieval::retrieve_sharded_by_queries(group, items, items, options, search);
      } else if ((variant == "queries" || variant == "gallery") && backend->exact()) {
        const auto axis =
            variant == "queries" ? retrieval::ShardAxis::queries : retrieval::ShardAxis::gallery;
        result = retrieval::retrieve_knn_sharded(group, items, items, options, axis);
      } else {
        throw oml::UsageError("--variants: unknown variant '" + variant +
                              "' (rank0, queries, gallery; gallery with --backend exact only)");
      }
      at::Tensor cpu = torch::tensor({process_cpu_seconds() - cpu_start}, torch::kDouble);
      group.barrier();
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      group.all_reduce(cpu, dist::ReduceOp::max);
      times[variant].push_back(seconds);
      if (!main) continue;
      std::string check;
      if (reference.offsets.size() <= 1) {
        reference = std::move(result);
      } else {
        check = same_lists(result, reference) ? ", lists identical to the first run" : ", LISTS DIFFER";
      }
      std::printf("round %lld %-8s %8.2f s wall, busiest rank %7.2f s CPU, load %s%s\n",
                  static_cast<long long>(round), variant.c_str(), seconds, cpu.item<double>(),
                  load_average().c_str(), check.c_str());
      std::fflush(stdout);
    }
  }
  if (main) {
    for (const std::string& variant : variants) {
      const double m = median(times[variant]);
      std::printf("median %-8s %8.2f s", variant.c_str(), m);
      if (times.count("rank0") && variant != "rank0")
        std::printf("  (%.2fx rank 0 alone)", median(times["rank0"]) / m);
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace

OML_BENCHMARK(sharded_knn) {
  oml::cli::CommandSpec spec;
  spec.name = "bench_sharded_knn";
  spec.summary = "k-NN under DDP: rank 0 alone vs split over the ranks by queries / by gallery";
  spec.usage = "  bench_sharded_knn --nproc-per-node N [--n 200000 --dim 128 --threads 1 --rounds 2]";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    // clang-format off
    o.add_options()
      ("n", po::value(&args.n), "items (each query and gallery)")
      ("dim", po::value(&args.dim), "embedding dimension")
      ("top-k", po::value(&args.top_k), "neighbours per query")
      ("threads", po::value(&args.threads), "intra-op threads per rank")
      ("rounds", po::value(&args.rounds), "times each variant is measured (alternately)")
      ("variants", po::value(&args.variants), "comma-separated: rank0, queries, gallery")
      ("backend", po::value(&args.backend), "retrieval backend (default args): exact, faiss_ivf, ...");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) -> int {
    if (auto code = oml::cli::launch_if_requested(inv)) return *code;
    const dist::World world = dist::world_from_environment();
    oml::configure_threads(static_cast<int>(args.threads), world.local_world_size);
    // Long enough for the others to wait while rank 0 ranks a large set alone.
    auto group = dist::ProcessGroup::connect(world, {7200.0, "gloo"});
    return run(*group);
  };
  return oml::cli::run_command(argc, argv, spec);
}

}  // namespace sharded_knn_benchmark
