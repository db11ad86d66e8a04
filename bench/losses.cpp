// Per-step time of the losses from pytorch-metric-learning and OML's own (forward + backward of the
// loss alone, on a fixed batch of embeddings): the C++ side of bench/losses_python.py, which times
// PML's classes and OML's (OML's code as tests/python/oml_losses_reference.py holds it) on the same
// shapes. Compare the two in one session (docs/benchmarks.md#pml-losses).
//
//   bench_losses [threads] [batch] [dim] [steps]      (defaults: 0 = all cores, 160, 128, 50)
//
// The batch is P x K = batch / 10 labels x 10 items; the losses with class weights have
// kNumClasses classes (the batch's labels among them), their weights' gradient included in the
// backward. OML's `triplet` / `triplet_plain` read the batch as triplets: its first 3 (batch / 3)
// rows. `triplet_with_miner` runs with OML's all_triplets (a batch of 200 is OML's CARS batch,
// 20 x 10: 342,000 triplets) and hard_triplets miners. Prints the median ms per step of each loss.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "benchmark.h"
#include "oml/config/document.h"
#include "oml/losses/criterion.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"

namespace losses_benchmark {

namespace {

constexpr int64_t kNumClasses = 100;  // also in bench/losses_python.py

}  // namespace

OML_BENCHMARK(losses) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 160;
  const int64_t dim = argc > 3 ? std::atoll(argv[3]) : 128;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 50;
  if (threads > 0) torch::set_num_threads(threads);
  oml::cli::register_builtins();
  torch::manual_seed(0);
  const auto labels = torch::arange(batch / 10).repeat_interleave(10);
  const auto base = torch::randn({labels.size(0), dim});
  std::printf("batch %lld x %lld, %d intra-op threads, median of %d steps (forward + backward)\n",
              static_cast<long long>(labels.size(0)), static_cast<long long>(dim), torch::get_num_threads(),
              steps);
  const oml::losses::CriterionContext context{dim, kNumClasses};
  // (what is printed, the criterion): each loss with its defaults, then PML's usual pairing of the
  // multi-similarity loss with its miner, and a loss under another distance.
  const std::vector<std::pair<std::string, std::string>> cases{
      {"contrastive", "{name: contrastive}"},
      {"multi_similarity", "{name: multi_similarity}"},
      {"supcon", "{name: supcon}"},
      {"ntxent", "{name: ntxent}"},
      {"circle", "{name: circle}"},
      {"proxy_anchor", "{name: proxy_anchor}"},
      {"proxy_nca", "{name: proxy_nca}"},
      {"soft_triple", "{name: soft_triple}"},
      {"cosface", "{name: cosface}"},
      {"sub_center_arcface", "{name: sub_center_arcface}"},
      {"multi_similarity+miner", "{name: multi_similarity, args: {miner: {name: multi_similarity}}}"},
      {"contrastive cosine", "{name: contrastive, args: {distance: cosine, pos_margin: 1, neg_margin: 0}}"},
      // OML's own losses with their defaults (mlp_arcface needs its MLP's sizes).
      {"oml triplet", "{name: triplet}"},
      {"oml triplet_plain", "{name: triplet_plain}"},
      {"oml arcface", "{name: arcface}"},
      {"oml mlp_arcface", "{name: mlp_arcface, args: {mlp_features: [256, 128]}}"},
      // OML's triplet_with_miner as its CARS config has it (soft margin, every triplet), and with
      // the hard miner; the miner's time counts.
      {"tri_miner all_triplets",
       "{name: triplet_with_miner, args: {margin: null, miner: {name: all_triplets}}}"},
      {"tri_miner hard", "{name: triplet_with_miner, args: {margin: null, miner: {name: hard_triplets}}}"},
  };
  // The triplet losses' batch: its first 3 n rows as n triplets, labelled as triplets (anchor and
  // positive label i, negative label n + i), laid out as each loss reads them.
  const int64_t triplets_n = labels.size(0) / 3;
  const int64_t triplet_rows = 3 * triplets_n;
  const auto first = torch::arange(triplets_n);
  const auto block_labels = torch::cat({first, first, first + triplets_n});                 // triplet
  const auto plain_labels = torch::stack({first, first, first + triplets_n}, 1).flatten();  // triplet_plain
  for (const auto& [name, yaml] : cases) {
    const auto doc = oml::config::Document::from_string("criterion: " + yaml + "\n", "bench.yaml");
    const auto loss = oml::registries().losses.create(
        oml::config::parse_component(doc.root()["criterion"], "criterion"), context);
    const bool triplets = name == "oml triplet" || name == "oml triplet_plain";
    std::vector<double> ms;
    for (int step = -3; step < steps; ++step) {  // three warm-up steps
      const auto embeddings =
          (triplets ? base.narrow(0, 0, triplet_rows) : base).clone().requires_grad_(true);
      const auto start = std::chrono::steady_clock::now();
      const auto& batch_labels =
          name == "oml triplet" ? block_labels : (name == "oml triplet_plain" ? plain_labels : labels);
      loss->forward(embeddings, batch_labels).loss.backward();
      const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
      if (step >= 0) ms.push_back(took.count());
    }
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    std::printf("  %-22s %8.3f ms/step\n", name.c_str(), ms[ms.size() / 2]);
  }
  return 0;
}

}  // namespace losses_benchmark
