// ViT inference throughput (no gradient, eval mode) on this machine's CPU; the Python
// counterpart is bench/vit_inference_python.py (same network, same batches).
//
//   bench_vit_inference [threads] [arch] [batch] [batches] [size] [precision]
//
// Defaults: all cores, vits16, batch 16, 4 timed batches (after one warm-up), 224 px, precision
// 32 (bf16: under the AutocastGuard oml-predict uses). Prints images/s of ViTImpl::forward on
// random images.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "benchmark.h"
#include "oml/common/autocast.h"
#include "oml/common/runtime.h"
#include "oml/config/precision.h"
#include "oml/models/vit.h"

namespace vit_inference_benchmark {

OML_BENCHMARK(vit_inference) {
  oml::tune_allocator();  // as every oml-* command does
  const int threads = oml::configure_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  const std::string arch = argc > 2 ? argv[2] : "vits16";
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 16;
  const int batches = argc > 4 ? std::atoi(argv[4]) : 4;
  const int64_t size = argc > 5 ? std::atoll(argv[5]) : 224;
  const std::string precision_name = argc > 6 ? argv[6] : "32";
  if (precision_name != "32" && precision_name != "bf16") {
    std::fprintf(stderr, "bench_vit_inference: precision must be 32 or bf16, got '%s'\n",
                 precision_name.c_str());
    return 2;
  }
  const auto precision =
      precision_name == "bf16" ? oml::config::Precision::bf16 : oml::config::Precision::fp32;
  torch::manual_seed(0);
  oml::models::ViTOptions options;
  options.arch = arch;
  oml::models::ViT model(options);
  model->eval();
  torch::NoGradGuard no_grad;
  const oml::AutocastGuard autocast(precision, torch::kCPU);
  const auto images = torch::randn({batch, 3, size, size});
  model->forward(images);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) model->forward(images);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("oml-cpp %s %s inference, %lldx3x%lldx%lld, %d threads (%s): %.2f images/s\n", arch.c_str(),
              oml::config::precision_name(precision).c_str(), static_cast<long long>(batch),
              static_cast<long long>(size), static_cast<long long>(size), threads,
              oml::blas_backend().c_str(), static_cast<double>(batch * batches) / seconds);
  return 0;
}

}  // namespace vit_inference_benchmark
