// One epoch of the `balance` sampler on 1,000,000 items / 100,000 labels (target: < 1 s).
// Prints the time to build the sampler (grouping rows by label) and to draw one epoch, as the
// median of several runs. Results: docs/benchmarks.md.
//   bench_balance_sampler [items=1000000] [labels=100000] [P=8] [K=4] [runs=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "benchmark.h"
#include "oml/samplers/balance_sampler.h"

namespace balance_sampler_benchmark {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}
}  // namespace

OML_BENCHMARK(balance_sampler) {
  const int64_t items = argc > 1 ? std::atoll(argv[1]) : 1000000;
  const int64_t labels = argc > 2 ? std::atoll(argv[2]) : 100000;
  const int64_t p = argc > 3 ? std::atoll(argv[3]) : 8;
  const int64_t k = argc > 4 ? std::atoll(argv[4]) : 4;
  const int runs = argc > 5 ? std::atoi(argv[5]) : 5;

  // Every label gets items / labels rows, interleaved in random order as in a real dataframe.
  oml::data::SamplerContext context;
  context.labels.reserve(items);
  for (int64_t i = 0; i < items; ++i) context.labels.push_back(i % labels);
  std::shuffle(context.labels.begin(), context.labels.end(), std::mt19937_64(1));
  context.seed = 42;
  context.source = "the benchmark labels";

  // Wall and CPU time: on a busy machine the CPU time is the figure that carries over.
  std::vector<double> build_s, epoch_s, build_cpu, epoch_cpu;
  int64_t batches = 0;
  for (int run = 0; run < runs; ++run) {
    auto start = std::chrono::steady_clock::now();
    double cpu = cpu_seconds();
    const oml::samplers::BalanceSampler sampler(context, {p, k, std::nullopt});
    build_s.push_back(seconds_since(start));
    build_cpu.push_back(cpu_seconds() - cpu);
    start = std::chrono::steady_clock::now();
    cpu = cpu_seconds();
    batches = static_cast<int64_t>(sampler.batches(run).size());
    epoch_s.push_back(seconds_since(start));
    epoch_cpu.push_back(cpu_seconds() - cpu);
  }
  std::printf("balance sampler: %lld items, %lld labels, P=%lld, K=%lld: %lld batches per epoch\n",
              static_cast<long long>(items), static_cast<long long>(labels), static_cast<long long>(p),
              static_cast<long long>(k), static_cast<long long>(batches));
  std::printf("  build (group rows by label): %.3f s wall, %.3f s CPU (medians of %d)\n", median(build_s),
              median(build_cpu), runs);
  std::printf("  one epoch:                   %.3f s wall, %.3f s CPU (medians of %d)\n", median(epoch_s),
              median(epoch_cpu), runs);
  return 0;
}

}  // namespace balance_sampler_benchmark
