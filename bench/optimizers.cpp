// Time of one optimizer step (the update alone: gradients are fixed random tensors) of sgd,
// adam and adamw with torch.optim's three ways of computing it — the for-loop, foreach, fused
// (oml/optim/multi_tensor.h) — over the parameters of resnet18 (62 tensors, 11.2M values) and
// ViT-S/16 (152 tensors, 21.7M values): the C++ side of bench/optimizers_python.py, which times
// torch.optim with the same flags on the same parameter shapes
// (docs/benchmarks.md#optimizer-step-for-loop-foreach-fused-2026-11-29).
//
//   bench_optimizers [threads] [steps]      (defaults: 0 = all cores, 30)
//
// Prints the median ms per step of each case.
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
#include "oml/models/extractor.h"
#include "oml/optim/multi_tensor.h"
#include "oml/optim/optimizer.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"

namespace optimizers_benchmark {

namespace {

oml::config::ComponentSpec component(const std::string& yaml) {
  static std::vector<oml::config::Document> keep;  // specs refer to their document's nodes
  keep.push_back(oml::config::Document::from_string("c: " + yaml, "<bench_optimizers>"));
  return oml::config::parse_component(keep.back().root()["c"], "c");
}

double median_ms_per_step(const std::vector<torch::Tensor>& parameters, const std::string& optimizer,
                          int steps) {
  std::vector<torch::Tensor> params;
  for (const auto& p : parameters) {
    params.push_back(p.detach().clone().requires_grad_(true));
    params.back().mutable_grad() = torch::randn_like(p) * 1e-3;
  }
  auto opt =
      oml::registries().optimizers.create(component(optimizer), oml::optim::OptimizerContext{params, {}});
  for (int i = 0; i < 3; ++i) opt->step();  // warm-up: the state is created in the first step
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    opt->step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

OML_BENCHMARK(optimizers) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  const int steps = std::max(1, argc > 2 ? std::atoi(argv[2]) : 30);
  if (threads > 0) torch::set_num_threads(threads);
  oml::cli::register_builtins();
  torch::manual_seed(0);
  const std::vector<std::pair<std::string, std::string>> models{
      {"resnet18", "{name: resnet, args: {arch: resnet18, weights: null, remove_fc: true}}"},
      {"vits16", "{name: vit, args: {arch: vits16, weights: null}}"}};
  const std::vector<std::string> optimizers{"sgd", "adam", "adamw"};
  // (label, the args added to lr): the three kernels as torch.optim's flags select them.
  const std::vector<std::pair<std::string, std::string>> kernels{
      {"for-loop", "foreach: false"}, {"foreach", "foreach: true"}, {"fused", "fused: true"}};
  std::printf("%d intra-op threads, median of %d steps\n", torch::get_num_threads(), steps);
  std::printf("%-9s %-6s %10s %10s %10s\n", "model", "optim", "for-loop", "foreach", "fused");
  for (const auto& [model_name, model_spec] : models) {
    const auto model = oml::registries().extractors.create(component(model_spec));
    const std::vector<torch::Tensor> parameters = model->parameters();
    for (const std::string& optimizer : optimizers) {
      std::printf("%-9s %-6s", model_name.c_str(), optimizer.c_str());
      for (const auto& kernel : kernels) {
        const std::string extra = optimizer == "sgd" ? ", momentum: 0.9" : "";
        const std::string spec =
            "{name: " + optimizer + ", args: {lr: 0.001" + extra + ", " + kernel.second + "}}";
        if (kernel.first == "fused" && !oml::optim::fused_kernels_available()) {
          std::printf(" %10s", "n/a");  // LibTorch 1.13: no fused kernels
        } else {
          std::printf(" %10.2f", median_ms_per_step(parameters, spec, steps));
        }
        std::fflush(stdout);
      }
      std::printf("   ms/step\n");
    }
  }
  return 0;
}

}  // namespace optimizers_benchmark
