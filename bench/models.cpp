// Training-step throughput of the built-in extractors and losses on this machine's CPU.
//
//   bench_models [threads]
//
// Prints images/s of forward + backward + Adam step for conv_net on 28x28 batches (the
// Fashion-MNIST default) with the triplet loss and hard mining, and of resnet18 on 64x64 ones.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "benchmark.h"
#include "oml/common/runtime.h"
#include "oml/losses/miners.h"
#include "oml/losses/triplet_loss.h"
#include "oml/models/conv_net.h"
#include "oml/models/resnet.h"

namespace models_benchmark {

namespace {

double images_per_second(oml::models::Extractor& model, int64_t batch, int64_t channels, int64_t side,
                         int steps) {
  auto loss = oml::losses::TripletLossWithMiner(std::make_shared<oml::losses::HardTripletsMiner>());
  torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(1e-3));
  const auto images = torch::randn({batch, channels, side, side});
  const auto labels = torch::arange(batch / 4).repeat_interleave(4);
  model.train();
  const auto step = [&] {
    opt.zero_grad();
    loss->forward(model.forward(images), labels).loss.backward();
    opt.step();
  };
  step();  // warm-up (allocations, lazy initialisation)
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(batch * steps) / seconds;
}

}  // namespace

OML_BENCHMARK(models) {
  oml::tune_allocator(oml::AllocatorUse::training);  // as oml-train does
  const int threads = oml::configure_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  torch::manual_seed(0);
  std::printf("threads: %d, BLAS: %s\n", threads, oml::blas_backend().c_str());
  oml::models::ConvNetOptions small;
  small.in_channels = 1;
  oml::models::ConvNet conv(small);
  std::printf("conv_net (default args, 1x28x28, batch 128): %.0f images/s\n",
              images_per_second(*conv, 128, 1, 28, 20));
  oml::models::ResNetOptions r18;
  r18.arch = "resnet18";
  oml::models::ResNet resnet(r18);
  std::printf("resnet18 (3x64x64, batch 32): %.0f images/s\n", images_per_second(*resnet, 32, 3, 64, 5));
  return 0;
}

}  // namespace models_benchmark
