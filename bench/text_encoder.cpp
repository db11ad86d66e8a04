// BERT training step (forward + backward) on this machine's CPU; the Python counterpart is
// bench/text_encoder_python.py (transformers' BertModel, same shapes, same batch).
//
//   bench_text_encoder [threads] [precision] [layers] [batch] [length] [steps]
//
// Defaults: all cores, precision 32 (bf16: forward under the AutocastGuard the Trainer opens),
// 12 layers of BERT-base (hidden 768, 12 heads, intermediate 3072, vocabulary 30522), batch 4 of
// 64 tokens padded as in bench_text_batch below, 3 timed steps after one warm-up. A step is
// train-mode forward (dropout 0.1), mean pooling, loss = mean(embedding^2), backward; gradients
// are cleared between steps, no optimizer. Prints the mean seconds per step.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "benchmark.h"
#include "oml/common/autocast.h"
#include "oml/common/precision.h"
#include "oml/common/runtime.h"
#include "oml/models/text_encoder.h"

namespace text_encoder_benchmark {

namespace {

// Row r has length - r * length / (2 * batch) tokens (the longest first, the shortest about half
// as long), the rest padding (id 0); ids are (7 r + 13 j) mod (vocab - 3) + 3. The Python
// counterpart builds the same batch.
oml::models::TokenBatch bench_text_batch(int64_t batch, int64_t length, int64_t vocab) {
  auto ids = torch::zeros({batch, length}, torch::kLong);
  auto mask = torch::zeros({batch, length}, torch::kLong);
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t n = length - r * length / (2 * batch);
    for (int64_t j = 0; j < n; ++j) {
      ids[r][j] = (7 * r + 13 * j) % (vocab - 3) + 3;
      mask[r][j] = 1;
    }
  }
  return {ids, mask, torch::zeros_like(ids)};
}

}  // namespace

OML_BENCHMARK(text_encoder) {
  oml::tune_allocator(oml::AllocatorUse::training);  // as oml-train does
  const int threads = oml::configure_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  const std::string precision_name = argc > 2 ? argv[2] : "32";
  const int64_t layers = argc > 3 ? std::atoll(argv[3]) : 12;
  const int64_t batch = argc > 4 ? std::atoll(argv[4]) : 4;
  const int64_t length = argc > 5 ? std::atoll(argv[5]) : 64;
  const int steps = argc > 6 ? std::atoi(argv[6]) : 3;
  if (precision_name != "32" && precision_name != "bf16") {
    std::fprintf(stderr, "bench_text_encoder: precision must be 32 or bf16, got '%s'\n",
                 precision_name.c_str());
    return 2;
  }
  const auto precision = precision_name == "bf16" ? oml::Precision::bf16 : oml::Precision::fp32;
  torch::manual_seed(0);
  auto config = oml::models::default_text_config("bert");  // BERT-base's numbers
  config.num_hidden_layers = layers;
  oml::models::TextEncoder model(config, oml::models::TextPooling::mean);
  model->train();
  const auto tokens = bench_text_batch(batch, length, config.vocab_size);
  auto step = [&] {
    model->zero_grad();
    torch::Tensor loss;
    {
      const oml::AutocastGuard autocast(precision, torch::kCPU);
      loss = model->embed(tokens).pow(2).mean();
    }
    loss.backward();
  };
  step();  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("oml-cpp bert %lld layers %s forward+backward, batch %lldx%lld, %d threads (%s): %.3f s/step\n",
              static_cast<long long>(layers), oml::precision_name(precision).c_str(),
              static_cast<long long>(batch), static_cast<long long>(length), threads,
              oml::blas_backend().c_str(), seconds / steps);
  return 0;
}

}  // namespace text_encoder_benchmark
