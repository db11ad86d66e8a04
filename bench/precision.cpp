// Mixed precision on this machine's CPU: training-step throughput (forward + loss under the
// Trainer's AutocastGuard, backward, Adam) of resnet18 at 64x64, batch 32, soft triplet loss with
// hard mining — precision 32 vs bf16, each with the NCHW and the channels_last memory format
// (input and weights, or the input batch only), alternated over rounds (these machines drift: compare medians
// of alternating rounds).
//
//   bench_precision [threads] [rounds] [steps] [extractor-yaml] [side] [modes] [batch]
//
// extractor-yaml: another extractor as a config component, side: its image side (default 64),
// e.g. for a ViT: bench_precision 0 3 3 '{name: vit, args: {arch: vits16}}' 224. An audio
// extractor takes waveforms [batch, 1, side]: side is then samples per clip, e.g. ECAPA on 2 s
// at 16 kHz: bench_precision 0 3 3 '{name: ecapa_tdnn, args: {arch: ecapa_tdnn_taoruijie}}' 32000 nchw
// (its figures are clips/s; channels_last modes do not apply to its 1-d convolutions).
// modes: `all` (default), `32` / `bf16` for that precision's NCHW mode alone (one process per
// precision, for its peak RSS under /usr/bin/time -v), `nchw` for both NCHW modes, or `last` for
// both channels_last modes (input and weights).
// batch: the batch size (default 32; a multiple of 4: 4 items per label).
// OML_BENCH_DEVICE=cuda runs on cuda:0 (scripts/gpu_check.sh): the model, the batch and autocast
// there, the clock read after a synchronize; OML_BENCH_CUDA_GRAPHS=1 there steps as oml-train's
// `cuda_graphs: true` (a StepGraph: warm-up, capture, then every timed step replayed).
// OML_BENCH_TRACE=FILE writes a Chrome trace of the last timed steps (the last mode of the last
// round; bench/trace_ops.py sums it per operator). OML_BENCH_CUDNN_BENCHMARK=1 turns cuDNN's
// benchmark search on (oml-train's `benchmark: true`; bench/precision_python.py reads it too).
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "benchmark.h"
#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/common/runtime.h"
#include "oml/config/document.h"
#include "oml/config/precision.h"
#include "oml/losses/miners.h"
#include "oml/losses/triplet_loss.h"
#include "oml/models/extractor.h"
#include "oml/models/memory_format.h"
#include "oml/optim/multi_tensor.h"
#include "oml/optim/optimizer.h"
#include "oml/registry/registries.h"
#include "oml/report/profiler.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "training/step_graph.h"

namespace precision_benchmark {

namespace {

using oml::config::Precision;

torch::Device bench_device() {
  const char* device = std::getenv("OML_BENCH_DEVICE");
  return torch::Device(device != nullptr && std::string(device) == "cuda" ? "cuda:0" : "cpu");
}

bool cuda_graphs() {
  const char* graphs = std::getenv("OML_BENCH_CUDA_GRAPHS");
  return graphs != nullptr && std::string(graphs) == "1";
}

void synchronize(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

struct Mode {
  Precision precision;
  bool channels_last;  ///< the input batch in channels_last
  bool weights_last;   ///< the 4-d weights too (else only the input)
  std::string name;
};

// A synthetic batch of what the extractor takes: images [batch, 3, side, side] or waveforms
// [batch, 1, side].
torch::Tensor synthetic_batch(const oml::models::Extractor& model, int64_t batch, int64_t side) {
  if (model.input() == oml::models::ExtractorInput::audio) return torch::randn({batch, 1, side});
  return torch::randn({batch, 3, side, side});
}

double items_per_second(oml::models::Extractor& model, const Mode& mode, int64_t batch, int64_t side,
                        int steps) {
  auto loss = oml::losses::TripletLossWithMiner(std::make_shared<oml::losses::HardTripletsMiner>());
  // As `memory_format: channels_last` lays out oml-train's model (the same function).
  oml::models::set_memory_format(
      model, mode.weights_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  const torch::Device device = bench_device();
  // The registry's Adam with its defaults, as oml-train builds it (torch.optim's for-loop on the
  // CPU, foreach on CUDA); OML_BENCH_OPTIMIZER replaces it, e.g. '{name: adam, args: {lr: 1e-3, fused:
  // true}}'.
  const char* optimizer_yaml = std::getenv("OML_BENCH_OPTIMIZER");
  const auto doc = oml::config::Document::from_string(
      std::string("optimizer: ") + (optimizer_yaml ? optimizer_yaml : "{name: adam, args: {lr: 1e-3}}"),
      "<OML_BENCH_OPTIMIZER>");
  const auto opt_ptr =
      oml::registries().optimizers.create(oml::config::parse_component(doc.root()["optimizer"], "optimizer"),
                                          oml::optim::OptimizerContext{model.parameters(), {}});
  auto& opt = *opt_ptr;
  auto images = synthetic_batch(model, batch, side).to(device);
  if (mode.channels_last) images = images.contiguous(at::MemoryFormat::ChannelsLast);
  const auto labels = torch::arange(batch / 4).repeat_interleave(4).to(device);
  model.train();
  // The Trainer's whole step (Trainer::graph_step), eagerly or through a StepGraph.
  std::unique_ptr<oml::pipelines::StepGraph> graph;
  if (cuda_graphs()) {
    oml::pipelines::StepGraphConditions conditions;  // what oml-train checks, but for its pipeline's
    conditions.device = device;
    conditions.precision = mode.precision;
    auto* capturable = oml::pipelines::capturable_optimizer(opt, conditions.optimizer_problem);
    const std::string problem = oml::pipelines::step_graph_problem(conditions);
    if (!problem.empty()) throw oml::UsageError("OML_BENCH_CUDA_GRAPHS=1: " + problem);
    graph = std::make_unique<oml::pipelines::StepGraph>(device, *capturable,
                                                        std::vector<torch::nn::Module*>{&model});
  }
  oml::data::LoadedBatch inputs;
  inputs.images = images;
  inputs.labels = labels;
  const auto whole_step = [&](const oml::data::LoadedBatch& b) {
    oml::losses::LossOutput out;
    {
      const oml::AutocastGuard autocast(mode.precision, device, /*cache_casts=*/graph == nullptr);
      out = loss->forward(model.forward(b.images), b.labels);
    }
    oml::optim::zero_grad(opt);
    out.loss.backward();
    opt.step();
    return out;
  };
  const auto step = [&] { graph ? graph->step(inputs, whole_step) : whole_step(inputs); };
  // Warm-up (allocations, oneDNN primitive creation, CUDA kernels' first load; a graph's eager
  // steps and its capture).
  for (int i = 0; i < (graph ? oml::pipelines::StepGraph::kWarmupSteps + 1 : 1); ++i) step();
  synchronize(device);
  const char* trace_path = std::getenv("OML_BENCH_TRACE");
  std::unique_ptr<oml::report::TraceSession> trace;
  if (trace_path != nullptr) trace = std::make_unique<oml::report::TraceSession>(device.is_cuda());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  synchronize(device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (trace) trace->save(trace_path);  // each mode overwrites it: the last one stays
  return static_cast<double>(batch * steps) / seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

OML_BENCHMARK(precision) {
  oml::tune_allocator(oml::AllocatorUse::training);  // as oml-train does
  const int threads = oml::configure_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 5;
  const std::string spec_text = argc > 4 ? argv[4] : "{name: resnet, args: {arch: resnet18}}";
  const int64_t side = argc > 5 ? std::atoll(argv[5]) : 64;
  const std::string only = argc > 6 ? argv[6] : "all";
  if (only != "all" && only != "32" && only != "bf16" && only != "nchw" && only != "last") {
    std::fprintf(stderr, "bench_precision: modes must be all, 32, bf16, nchw or last, got '%s'\n",
                 only.c_str());
    return 2;
  }
  const int64_t batch = argc > 7 ? std::atoll(argv[7]) : 32;
  if (batch < 4 || batch % 4 != 0) {
    std::fprintf(stderr, "bench_precision: batch must be a positive multiple of 4, got '%s'\n", argv[7]);
    return 2;
  }
  // As oml-train's `benchmark: true` (Lightning's): cuDNN times its algorithms per shape.
  const char* cudnn_benchmark = std::getenv("OML_BENCH_CUDNN_BENCHMARK");
  if (cudnn_benchmark != nullptr && std::string(cudnn_benchmark) == "1")
    at::globalContext().setBenchmarkCuDNN(true);
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("extractor: " + spec_text, "<bench_precision>");
  const oml::config::ComponentSpec spec = oml::config::parse_component(doc.root()["extractor"], "extractor");
  torch::manual_seed(0);
  auto model = oml::registries().extractors.create(spec);
  model->to(bench_device());
  const bool audio = model->input() == oml::models::ExtractorInput::audio;
  if (audio && (only == "all" || only == "last")) {
    std::fprintf(stderr,
                 "bench_precision: an audio extractor has no channels_last modes; modes must be 32, bf16 "
                 "or nchw\n");
    return 2;
  }
  const char* unit = audio ? "clips/s" : "images/s";
  const std::string input_size =
      audio ? std::to_string(side) + " samples" : std::to_string(side) + "x" + std::to_string(side);
  std::printf("device: %s, threads: %d, BLAS: %s, extractor: %s, %s, batch %lld, %d steps x %d rounds%s\n",
              bench_device().str().c_str(), threads, oml::blas_backend().c_str(), spec_text.c_str(),
              input_size.c_str(), static_cast<long long>(batch), steps, rounds,
              at::globalContext().benchmarkCuDNN() ? ", cuDNN benchmark" : "");
  std::vector<Mode> modes{{Precision::fp32, false, false, "32 NCHW"},
                          {Precision::bf16, false, false, "bf16 NCHW"},
                          {Precision::fp32, true, true, "32 channels_last"},
                          {Precision::bf16, true, true, "bf16 channels_last"},
                          {Precision::fp32, true, false, "32 cl input only"},
                          {Precision::bf16, true, false, "bf16 cl input only"}};
  if (only == "nchw") modes.resize(2);
  if (only == "last") modes = {modes[2], modes[3]};
  if (only == "32" || only == "bf16") modes = {modes[only == "32" ? 0 : 1]};
  std::vector<std::vector<double>> results(modes.size());
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t m = 0; m < modes.size(); ++m) {
      const double v = items_per_second(*model, modes[m], batch, side, steps);
      results[m].push_back(v);
      std::printf("round %d  %-20s %7.1f %s\n", r + 1, modes[m].name.c_str(), v, unit);
      std::fflush(stdout);
    }
  }
  std::printf("median over %d rounds:\n", rounds);
  for (std::size_t m = 0; m < modes.size(); ++m) {
    std::printf("  %-20s %7.1f %s", modes[m].name.c_str(), median(results[m]), unit);
    if (modes.size() > 1) std::printf(" (%.2fx precision 32 NCHW)", median(results[m]) / median(results[0]));
    std::printf("\n");
  }
  return 0;
}

}  // namespace precision_benchmark
