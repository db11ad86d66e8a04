// The GPU test set (ctest label `gpu`; scripts/gpu_check.sh runs it on a machine with one NVIDIA
// GPU). Built with every CUDA build of LibTorch, so that CI compiles it; registered with ctest
// only when configured with -DOML_GPU_TESTS=ON, since every case needs cuda:0.
//
// What it shows: a training step on cuda:0 equals the CPU step, and a channels_last one the NCHW one; bf16
// and fp16 autocast on CUDA with the gradient scaler's fused kernels (an Inf step is skipped and the scale
// halves, as in PyTorch); Adam, AdamW and SGD on CUDA default to foreach, and their foreach and fused steps
// equal the CPU's; a one-rank NCCL process group; two ranks over Gloo sharing the one GPU
// (sync_dicts and gradient sync of CUDA tensors, equal to the same ranks on the CPU); the default
// job's training step (and the hard triplet loss's, and the host-listing miners') queues its work
// without a host synchronisation; the loader's batches come
// in page-locked memory and reach the GPU through the side stream intact; CUDA graphs replay
// captured work, refuse a synchronising capture cleanly, and the default job's step replayed
// from one follows its eager losses over 200 steps (cuda_graphs), or falls back to them.
#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>  // c10's sync debug mode
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <filesystem>
#include <limits>

#include "distributed/c10d_adapter.h"  // white box: a one-rank NCCL group (ProcessGroup needs 2+)
#include "oml/common/autocast.h"
#include "oml/common/determinism.h"
#include "oml/common/pending_scalars.h"
#include "oml/config/document.h"
#include "oml/config/precision.h"
#include "oml/data/dataset.h"
#include "oml/data/device_copy.h"
#include "oml/data/loader.h"
#include "oml/distributed/cuda_graph.h"
#include "oml/losses/criterion.h"
#include "oml/losses/host_labels.h"
#include "oml/models/extractor.h"
#include "oml/models/memory_format.h"
#include "oml/optim/grad_scaler.h"
#include "oml/optim/multi_tensor.h"
#include "oml/optim/optimizer.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"
#include "torch_compat.h"  // white box: the optimizer state's key
#include "training/step_graph.h"

namespace fs = std::filesystem;
using oml::AutocastGuard;
using oml::config::Precision;

namespace {

const torch::Device kGpu("cuda:0");

void require_gpu() {
  REQUIRE(torch::cuda::is_available());  // these tests are only registered for a GPU machine
}

std::shared_ptr<oml::models::Extractor> conv_net() {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(
      "extractor: {name: conv_net, args: {in_channels: 1, channels: [8, 16], feat_dim: 16}}", "model.yaml");
  return oml::registries().extractors.create(
      oml::config::parse_component(doc.root()["extractor"], "extractor"));
}

std::shared_ptr<oml::losses::Criterion> triplet_loss(int64_t dim) {
  const auto doc = oml::config::Document::from_string(
      "criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}",
      "loss.yaml");
  oml::losses::CriterionContext context;
  context.embedding_size = dim;
  context.num_classes = 4;
  return oml::registries().losses.create(oml::config::parse_component(doc.root()["criterion"], "criterion"),
                                         context);
}

struct StepResult {
  double loss = 0;
  std::vector<at::Tensor> gradients;   ///< of the step, on the CPU
  std::vector<at::Tensor> parameters;  ///< after the step, on the CPU
};

// One Adam step of conv_net + triplet loss from seed 7, on `device`. Adam's eps is 1e-6, not
// 1e-8: a triplet loss on Euclidean distances does not depend on the last layer's bias (it shifts
// every embedding alike), so that gradient is rounding noise (~1e-9), and Adam turns noise into a
// step of lr * g / (|g| + eps) -- with eps 1e-8 a random +-1e-4 on each device, seen on an H100.
StepResult train_step(torch::Device device) {
  torch::manual_seed(7);
  auto model = conv_net();
  auto loss = triplet_loss(model->feat_dim());
  model->to(device);
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3).eps(1e-6));
  const auto images = torch::randn({16, 1, 28, 28}).to(device);
  const auto labels = torch::arange(4).repeat_interleave(4).to(device);
  oml::optim::zero_grad(optimizer);
  const auto out = loss->forward(model->forward(images), labels);
  out.loss.backward();
  StepResult result{out.loss.item<double>(), {}, {}};
  for (const auto& p : model->parameters()) result.gradients.push_back(p.grad().detach().cpu());
  optimizer.step();
  for (const auto& p : model->parameters()) result.parameters.push_back(p.detach().cpu());
  return result;
}

}  // namespace

TEST_CASE("A training step on cuda:0 equals the same step on the CPU", "[gpu]") {
  require_gpu();
  // In full fp32: PyTorch lets cuDNN convolutions use TF32 by default (10-bit mantissa), which
  // moves gradients in the third or fourth digit; that is a speed setting, not this comparison.
  auto& context = at::globalContext();
  const bool tf32 = context.allowTF32CuDNN();
  context.setAllowTF32CuDNN(false);
  const auto cpu = train_step(torch::kCPU);
  const auto gpu = train_step(kGpu);
  CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-4));
  REQUIRE(gpu.parameters.size() == cpu.parameters.size());
  for (std::size_t i = 0; i < cpu.parameters.size(); ++i) {
    INFO("parameter " << i << ", largest gradient difference "
                      << (gpu.gradients[i] - cpu.gradients[i]).abs().max().item<double>()
                      << ", largest parameter difference "
                      << (gpu.parameters[i] - cpu.parameters[i]).abs().max().item<double>());
    CHECK(torch::allclose(gpu.gradients[i], cpu.gradients[i], /*rtol=*/1e-3, /*atol=*/1e-6));
    CHECK(torch::allclose(gpu.parameters[i], cpu.parameters[i], /*rtol=*/1e-4, /*atol=*/1e-5));
  }
  context.setAllowTF32CuDNN(tf32);
}

TEST_CASE("A channels_last model takes fused Adam steps on cuda:0 as the NCHW model does, in fp32 and bf16",
          "[gpu][memory_format]") {
  require_gpu();
  oml::cli::register_builtins();
  auto& context = at::globalContext();
  const bool tf32 = context.allowTF32CuDNN();
  context.setAllowTF32CuDNN(false);  // the fp32 comparison in full fp32, as the CPU case above
  const auto doc = oml::config::Document::from_string(
      "optimizer: {name: adam, args: {lr: 0.001, fused: true}}", "optim.yaml");
  torch::manual_seed(7);
  const auto images = torch::randn({16, 1, 28, 28}).to(kGpu);
  const auto labels = torch::arange(4).repeat_interleave(4).to(kGpu);
  // The first step's loss and gradients in `format` and `precision`, after two more steps (which
  // CUDA's fused Adam refuses unless parameters, gradients and moments are laid out alike).
  const auto run = [&](at::MemoryFormat format, Precision precision) {
    torch::manual_seed(7);
    auto model = conv_net();
    auto loss = triplet_loss(model->feat_dim());
    model->to(kGpu);
    oml::models::set_memory_format(*model, format);
    model->train();
    const auto opt = oml::registries().optimizers.create(
        oml::config::parse_component(doc.root()["optimizer"], "optimizer"),
        oml::optim::OptimizerContext{model->parameters(), {}});
    StepResult first;
    for (int step = 0; step < 3; ++step) {
      oml::optim::zero_grad(*opt);
      at::Tensor value;
      {
        const AutocastGuard autocast(precision, kGpu);
        value = loss->forward(model->forward(images), labels).loss;
      }
      value.backward();
      if (step == 0) {
        first.loss = value.item<double>();
        for (const auto& p : model->parameters()) {
          if (p.dim() == 4) CHECK(p.grad().is_contiguous(format));
          first.gradients.push_back(p.grad().detach().cpu());
        }
      }
      opt->step();
    }
    for (const auto& p : model->parameters()) first.parameters.push_back(p.detach().cpu());
    return first;
  };
  for (const Precision precision : {Precision::fp32, Precision::bf16}) {
    INFO(oml::config::precision_name(precision));
    const auto nchw = run(at::MemoryFormat::Contiguous, precision);
    const auto last = run(at::MemoryFormat::ChannelsLast, precision);
    const double tolerance = precision == Precision::fp32 ? 1e-4 : 2e-2;
    CHECK(last.loss == Approx(nchw.loss).epsilon(tolerance));
    for (std::size_t i = 0; i < nchw.gradients.size(); ++i) {
      INFO("gradient " << i);
      CHECK((last.gradients[i] - nchw.gradients[i]).abs().max().item<double>() <=
            10 * tolerance * nchw.gradients[i].abs().max().item<double>());
    }
  }
  context.setAllowTF32CuDNN(tf32);
}

TEST_CASE("bf16 and fp16 autocast on CUDA compute the forward in the low precision, the loss in float32",
          "[gpu][precision]") {
  require_gpu();
  for (const auto& [precision, dtype] :
       {std::pair{Precision::bf16, torch::kBFloat16}, std::pair{Precision::fp16, torch::kHalf}}) {
    INFO(oml::config::precision_name(precision));
    torch::manual_seed(3);
    auto model = conv_net();
    auto loss = triplet_loss(model->feat_dim());
    model->to(kGpu);
    const auto images = torch::randn({8, 1, 28, 28}, kGpu);
    const auto labels = torch::arange(2, kGpu).repeat_interleave(4);
    at::Tensor embeddings, value;
    {
      const AutocastGuard autocast(precision, kGpu);
      embeddings = model->forward(images);
      value = loss->forward(embeddings, labels).loss;
    }
    CHECK(embeddings.scalar_type() == dtype);
    CHECK(value.scalar_type() == torch::kFloat);
    value.backward();
    for (const auto& p : model->parameters()) {
      CHECK(p.scalar_type() == torch::kFloat);
      if (p.grad().defined()) CHECK(p.grad().scalar_type() == torch::kFloat);
    }
  }
}

TEST_CASE("The gradient scaler's CUDA kernels skip an Inf step, halve the scale and grow it again",
          "[gpu][precision]") {
  require_gpu();
  oml::optim::GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2;
  oml::optim::GradScaler scaler(options);
  auto w = torch::ones({3}, torch::TensorOptions().device(kGpu).requires_grad(true));
  const auto scaled = scaler.scale((w * torch::tensor({1.0f, 2.0f, 3.0f}, kGpu)).sum());
  CHECK(scaled.item<double>() == Approx(6.0 * 1024));
  scaled.backward();
  CHECK(scaler.unscale({w}));
  CHECK(torch::allclose(w.grad().cpu(), torch::tensor({1.0f, 2.0f, 3.0f})));
  scaler.update();
  CHECK(scaler.current_scale() == 1024);

  w.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 0.0f}, kGpu);
  CHECK_FALSE(scaler.unscale({w}));
  scaler.update();
  CHECK(scaler.current_scale() == 512);
  CHECK(scaler.skipped_steps() == 1);
  for (int i = 0; i < 2; ++i) {
    w.mutable_grad() = torch::ones({3}, kGpu);
    CHECK(scaler.unscale({w}));
    scaler.update();
  }
  CHECK(scaler.current_scale() == 1024);
}

TEST_CASE(
    "Adam, AdamW and SGD on cuda:0 default to foreach, and their foreach and fused steps equal the CPU's",
    "[gpu][optim]") {
  require_gpu();
  oml::cli::register_builtins();
  using oml::optim::StepKernel;
  // PyTorch 2.x's default: foreach when every parameter is on CUDA, the for-loop on the CPU.
  CHECK(oml::optim::choose_step_kernel(oml::optim::KernelFlags{}, {torch::zeros({2}, kGpu)}) ==
        StepKernel::foreach);
  CHECK(oml::optim::choose_step_kernel(oml::optim::KernelFlags{}, {torch::zeros({2})}) ==
        StepKernel::for_loop);
  torch::manual_seed(5);
  const std::vector<at::Tensor> start{torch::randn({64, 32}), torch::randn({32})};
  std::vector<std::vector<at::Tensor>> grads(20);
  for (auto& step : grads) {
    for (const auto& s : start) step.push_back(torch::randn(s.sizes()));
  }
  const auto run = [&](const std::string& yaml, torch::Device device) {
    std::vector<at::Tensor> params;
    // Copies: on the CPU `to` returns the tensor itself, and every run starts from `start`.
    for (const auto& s : start) params.push_back(s.clone().to(device).requires_grad_(true));
    const auto doc = oml::config::Document::from_string("optimizer: " + yaml + "\n", "optim.yaml");
    const auto opt = oml::registries().optimizers.create(
        oml::config::parse_component(doc.root()["optimizer"], "optimizer"),
        oml::optim::OptimizerContext{params, {}});
    for (const auto& step : grads) {
      for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = step[i].clone().to(device);
      opt->step();
    }
    std::vector<at::Tensor> out;
    for (const auto& p : params) out.push_back(p.detach().cpu().clone());
    return out;
  };
  // The CPU runs the same flags (fused on the CPU's kernels; no flag: the for-loop there, foreach
  // on the GPU).
  for (const std::string yaml :
       {"{name: adam}", "{name: adam, args: {fused: true, amsgrad: true}}",
        "{name: adamw, args: {foreach: true, maximize: true}}", "{name: adamw, args: {fused: true}}",
        "{name: sgd, args: {lr: 0.05, momentum: 0.9, nesterov: true}}",
        "{name: sgd, args: {lr: 0.05, momentum: 0.9, weight_decay: 0.01, fused: true}}"}) {
    INFO(yaml);
    const auto cpu = run(yaml, torch::kCPU);
    const auto gpu = run(yaml, kGpu);
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      INFO("parameter " << i << ", largest difference " << (gpu[i] - cpu[i]).abs().max().item<double>());
      CHECK(torch::allclose(gpu[i], cpu[i], /*rtol=*/1e-5, /*atol=*/1e-6));
    }
  }
}

TEST_CASE("A one-rank NCCL process group reduces, broadcasts and gathers CUDA tensors", "[gpu][ddp]") {
  require_gpu();
  using namespace oml::distributed::detail;
  REQUIRE(backend_available("nccl"));
  const auto timeout = std::chrono::seconds(60);
  auto store = C10dStore::host(0, timeout);
  C10dGroup group(*store, 0, 1, "nccl", "127.0.0.1", timeout);
  std::vector<at::Tensor> tensors{torch::tensor({1.0f, 2.0f, 3.0f}, kGpu)};
  group.all_reduce(tensors, ReduceKind::sum).wait();
  CHECK(torch::equal(tensors[0].cpu(), torch::tensor({1.0f, 2.0f, 3.0f})));
  group.broadcast(tensors, 0).wait();
  std::vector<std::vector<at::Tensor>> gathered{{torch::zeros({3}, kGpu)}};
  group.all_gather(gathered, tensors).wait();
  CHECK(torch::equal(gathered[0][0].cpu(), torch::tensor({1.0f, 2.0f, 3.0f})));
  group.barrier().wait();
}

TEST_CASE(
    "Two ranks over Gloo share the one GPU: sync_dicts and gradient sync of CUDA tensors equal the CPU's",
    "[gpu][ddp]") {
  require_gpu();
  for (const std::string scenario : {"sync", "train"}) {
    INFO(scenario);
    oml::test::TempDir cpu_dir, gpu_dir;
    for (const auto& [device, dir] : {std::pair<std::string, const oml::test::TempDir*>{"cpu", &cpu_dir},
                                      std::pair<std::string, const oml::test::TempDir*>{"cuda", &gpu_dir}}) {
      const auto r =
          oml::test::run(oml::test::quote(OML_DDP_WORKER) + " --nproc-per-node 2 --scenario " + scenario +
                         " --device " + device + " --out " + oml::test::quote(dir->path().string()));
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
    }
    for (int rank = 0; rank < 2; ++rank) {
      const std::string name = "rank" + std::to_string(rank);
      CHECK(oml::test::read_file(gpu_dir / (name + ".txt")) ==
            oml::test::read_file(cpu_dir / (name + ".txt")));
      if (scenario != "train") continue;
      std::vector<at::Tensor> on_cpu, on_gpu;
      torch::load(on_cpu, (cpu_dir / (name + ".pt")).string());
      torch::load(on_gpu, (gpu_dir / (name + ".pt")).string());
      REQUIRE(on_gpu.size() == on_cpu.size());
      for (std::size_t i = 0; i < on_cpu.size(); ++i)
        CHECK(torch::allclose(on_gpu[i], on_cpu[i], 1e-4, 1e-5));
    }
  }
}

namespace {

// Counts the synchronising CUDA calls c10's sync debug mode reports (it warns once per call in
// L_WARN mode); other warnings are kept to show.
class SyncCounter : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchronizing CUDA operation") != std::string::npos) {
      ++synchronisations;
    } else {
      others.push_back(warning.msg());
    }
  }
  int synchronisations = 0;
  std::vector<std::string> others;
};

// configs/fashion_mnist/train_extractor.yaml's parts on cuda:0, in train mode, from seed 11:
// conv_net, ArcFace and Adam (its batches: balance 10 x 16 of 28 px images, grey read as RGB), or another
// criterion or optimizer.
struct DefaultJobParts {
  std::shared_ptr<oml::models::Extractor> extractor;
  std::shared_ptr<oml::losses::Criterion> criterion;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
};

DefaultJobParts default_job_parts(
    const std::string& criterion_yaml = "{name: arcface, args: {m: 0.5, s: 30}}",
    const std::string& optimizer_yaml = "{name: adam, args: {lr: 0.001}}") {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(
      "extractor: {name: conv_net, args: {channels: [16, 32, 64], feat_dim: 128}}\ncriterion: " +
          criterion_yaml + "\noptimizer: " + optimizer_yaml + "\n",
      "default_job.yaml");
  torch::manual_seed(11);
  DefaultJobParts parts;
  parts.extractor =
      oml::registries().extractors.create(oml::config::parse_component(doc.root()["extractor"], "extractor"));
  oml::losses::CriterionContext context;
  context.embedding_size = parts.extractor->feat_dim();
  context.num_classes = 10;
  parts.criterion = oml::registries().losses.create(
      oml::config::parse_component(doc.root()["criterion"], "criterion"), context);
  parts.extractor->to(kGpu);
  parts.criterion->to(kGpu);
  parts.extractor->train();
  parts.criterion->train();
  parts.optimizer = oml::registries().optimizers.create(
      oml::config::parse_component(doc.root()["optimizer"], "optimizer"),
      oml::optim::OptimizerContext{parts.extractor->parameters(), parts.criterion->parameters()});
  return parts;
}

}  // namespace

TEST_CASE("The default job's training step queues its work on cuda:0 without a host synchronisation",
          "[gpu][step_sync]") {
  require_gpu();
  // ArcFace (the default job's) and OML's SOP and InShop configs' triplet loss with hard mining;
  // and the miners that list triplets on the host from the step's declared host labels
  // (losses::HostLabels): OML's CARS config's all_triplets, CUB's triplets_with_memory, hard_cluster.
  const std::string criterion_yaml = GENERATE(
      std::string("{name: arcface, args: {m: 0.5, s: 30}}"),
      std::string("{name: triplet_with_miner, args: {margin: 0.15, miner: {name: hard_triplets}}}"),
      std::string("{name: triplet_with_miner, args: {margin: 0.15, miner: {name: all_triplets}}}"),
      std::string("{name: triplet_with_miner, args: {margin: null, miner: {name: triplets_with_memory, args: "
                  "{bank_size_in_batches: 5, tri_expand_k: 3}}}}"),
      std::string("{name: triplet_with_miner, args: {margin: 0.15, miner: {name: hard_cluster}}}"));
  INFO(criterion_yaml);
  auto [extractor, criterion, optimizer] = default_job_parts(criterion_yaml);
  const auto host_labels = torch::arange(10).repeat_interleave(16).pin_memory();
  std::vector<at::Tensor> host_images;
  for (int i = 0; i < 4; ++i) host_images.push_back(torch::randn({160, 3, 28, 28}).pin_memory());
  // As the extractor pipeline and the Trainer on CUDA: the loader's page-locked batches, their
  // images copied on the DeviceCopier's side stream, labels checked on the host and copied
  // without blocking, the loss and its logs taken as PendingScalars and read one step later.
  const oml::data::DeviceCopier copier(kGpu);
  REQUIRE(copier.side_stream());
  std::optional<oml::PendingScalars> unread;
  std::vector<double> read_losses;
  const auto step = [&](int i) {
    criterion->check_labels(host_labels);
    oml::data::LoadedBatch batch;
    batch.images = host_images[static_cast<std::size_t>(i) % host_images.size()];
    copier.to_device(batch);
    const auto& images = batch.images;
    const auto labels = host_labels.to(kGpu, true);
    oml::optim::zero_grad(*optimizer);
    const oml::losses::HostLabels host_copy(labels, host_labels);  // as the extractor pipeline's step
    const auto out = criterion->forward(extractor->forward(images), labels);
    out.loss.backward();
    optimizer->step();
    std::vector<at::Tensor> values{out.loss.detach()};
    for (const auto& kv : out.logs) values.push_back(kv.second);
    oml::PendingScalars taken(values);
    if (unread) read_losses.push_back(unread->read().at(0));
    unread.emplace(std::move(taken));
  };
  for (int i = 0; i < 3; ++i) step(i);  // warm-up: cuDNN's choices, Adam's state, the pinned pool
  SyncCounter counter;
  constexpr int kSteps = 8;
  {
    const c10::WarningUtils::WarningHandlerGuard guard(&counter);
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
    for (int i = 0; i < kSteps; ++i) step(3 + i);
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  }
  for (const auto& other : counter.others) WARN(other);
  INFO(counter.synchronisations << " synchronisations in " << kSteps << " steps");
  CHECK(counter.synchronisations == 0);
  // The values read one step late are the losses.
  REQUIRE(read_losses.size() == 3 + kSteps - 1);
  for (const double loss : read_losses) CHECK(std::isfinite(loss));
}

TEST_CASE("precision 16 with fused Adam skips non-finite steps on cuda:0 without a host synchronisation",
          "[gpu][step_sync][precision]") {
  require_gpu();
  // The Trainer's order with a fused optimizer (apply_gradients' device_skip_): unscale in place,
  // found_inf to the kernel, the scale's update; the logs are tensors read later.
  auto [extractor, criterion, optimizer] = default_job_parts("{name: arcface, args: {m: 0.5, s: 30}}",
                                                             "{name: adam, args: {lr: 0.001, fused: true}}");
  auto* skipping = dynamic_cast<oml::optim::DeviceSkipping*>(optimizer.get());
  REQUIRE(skipping != nullptr);
  REQUIRE(skipping->skips_on_device());
  // A modest initial scale: only the poisoned step below overflows.
  oml::optim::GradScalerOptions options;
  options.init_scale = 1024;
  oml::optim::GradScaler scaler(options);
  const auto labels = torch::arange(10).repeat_interleave(16).to(kGpu);
  const auto images = torch::randn({160, 3, 28, 28}).to(kGpu);
  std::vector<at::Tensor> params;
  for (const auto& group : optimizer->param_groups())
    params.insert(params.end(), group.params().begin(), group.params().end());
  const auto step = [&](bool poison) {
    oml::optim::zero_grad(*optimizer);
    at::Tensor loss;
    {
      const AutocastGuard autocast(Precision::fp16, kGpu);
      loss = criterion->forward(extractor->forward(images), labels).loss;
    }
    scaler.scale(loss).backward();
    if (poison) params.front().mutable_grad().fill_(std::numeric_limits<float>::infinity());
    scaler.unscale_in_place(params);
    skipping->skip_next_step_if(scaler.found_inf());
    optimizer->step();
    scaler.update();
    return std::vector<at::Tensor>{loss.detach(), scaler.scale_tensor(), scaler.skipped_steps_tensor()};
  };
  for (int i = 0; i < 3; ++i) step(false);  // warm-up: cuDNN's choices, Adam's state
  SyncCounter counter;
  std::vector<oml::PendingScalars> logs;
  std::vector<at::Tensor> before, after;  // the parameters around the poisoned step (device copies)
  {
    const c10::WarningUtils::WarningHandlerGuard guard(&counter);
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
    for (int i = 0; i < 6; ++i) {
      if (i == 3) {
        for (const auto& p : params) before.push_back(p.detach().clone());
      }
      logs.emplace_back(step(/*poison=*/i == 3));
      if (i == 3) {
        for (const auto& p : params) after.push_back(p.detach().clone());
      }
    }
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  }
  for (const auto& other : counter.others) WARN(other);
  CHECK(counter.synchronisations == 0);
  // The poisoned step changed nothing, counted one skip and halved the scale; the step counts
  // settle to the steps taken (9 attempted, the skipped ones not).
  const auto poisoned = logs[3].read();
  CHECK(poisoned.at(2) == logs[2].read().at(2) + 1);
  CHECK(poisoned.at(1) == Approx(logs[2].read().at(1) / 2));
  const double skipped = logs[5].read().at(2);
  CHECK(skipped == 1);
  skipping->settle_step_counts();
  const auto& state = static_cast<torch::optim::AdamParamState&>(
      *optimizer->state().at(oml::torch_compat::optimizer_state_key(params.front())));
  CHECK(state.step() == 9 - static_cast<int64_t>(skipped));
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(torch::equal(before[i], after[i]));
}

TEST_CASE("The loader's page-locked batches reach cuda:0 through the side stream intact", "[gpu][feed]") {
  require_gpu();
  // 64 rows of 4096 values, row i filled with i: each batch's contents say which rows it holds.
  constexpr int64_t kRows = 64, kDim = 4096;
  oml::data::DataSplit split;
  for (int64_t i = 0; i < kRows; ++i) {
    split.paths.push_back("row" + std::to_string(i));
    split.labels.push_back(i % 4);
    split.original_labels.push_back(i % 4);
    split.categories.emplace_back();
    split.lines.push_back(i + 2);
  }
  const auto rows = torch::arange(kRows, torch::kFloat32).unsqueeze(1).expand({kRows, kDim}).contiguous();
  const auto dataset = std::make_shared<oml::data::EmbeddingsDataset>(rows, split);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t b = 0; b < kRows / 8; ++b) {
    batches.emplace_back();
    for (int64_t i = 0; i < 8; ++i) batches.back().push_back((b * 8 + i) * 5 % kRows);  // 5 is coprime to 64
  }
  oml::data::LoaderOptions options;
  options.num_workers = 2;
  options.pin_memory = true;
  oml::data::Loader loader(dataset, batches, options);
  const oml::data::DeviceCopier copier(kGpu);
  REQUIRE(copier.side_stream());
  // Long work queued on the step's stream first: the copies must neither wait for it to be
  // right nor be overwritten by it (the step's stream waits for each copy before reading it).
  auto busy = torch::randn({2048, 2048}, torch::TensorOptions(kGpu));
  std::vector<at::Tensor> sums;
  int64_t seen = 0;
  while (auto batch = loader.next()) {
    CHECK(batch->images.is_pinned());
    CHECK(batch->labels.is_pinned());
    for (int i = 0; i < 4; ++i) busy = torch::tanh(busy.mm(busy));
    const auto expected = batch->indices.to(torch::kFloat32) * kDim;
    copier.to_device(*batch);
    REQUIRE(batch->images.device() == kGpu);
    CHECK(batch->labels.device().is_cpu());  // the step checks labels in host memory
    sums.push_back(batch->images.sum(1));    // queued on the step's stream, after the copy
    CHECK(torch::equal(sums.back().cpu(), expected));
    ++seen;
  }
  CHECK(seen == kRows / 8);
  CHECK(torch::isfinite(busy).all().item<bool>());
}

TEST_CASE(
    "A CUDA graph replays its captured work on new inputs, and a capture that synchronises fails cleanly",
    "[gpu][cuda_graphs]") {
  require_gpu();
  const auto x = torch::ones({4096}, kGpu);
  at::Tensor y;
  oml::distributed::CudaGraph graph(kGpu);
  graph.run([&] { y = x * 2 + 1; });  // eagerly, on the graph's stream
  CHECK(y[0].item<float>() == 3);
  graph.capture([&] { y = x * 2 + 1; });
  REQUIRE(graph.captured());
  x.copy_(torch::arange(4096, torch::kFloat).to(kGpu));
  graph.replay();
  CHECK(torch::equal(y.cpu(), torch::arange(4096, torch::kFloat) * 2 + 1));
  // A read back inside a capture: CUDA refuses it, the capture ends, the graph stays empty and
  // everything else goes on working.
  oml::distributed::CudaGraph failing(kGpu);
  CHECK_THROWS(failing.capture([&] { (void)x.sum().item<float>(); }));
  CHECK_FALSE(failing.captured());
  // The CUDA generator left capture mode with it: eager dropout still draws.
  CHECK(torch::dropout(torch::ones({1024}, kGpu), 0.5, /*train=*/true).eq(0).any().item<bool>());
  x.fill_(5);
  graph.replay();
  CHECK(y[7].item<float>() == 11);
  CHECK(torch::allclose((x * 3).cpu(), torch::full({4096}, 15.0f)));
}

namespace {

// The default job's parts (as the step-sync case above) trained for `steps` steps on four fixed
// batches, the Trainer's whole step as cuda_graphs runs it: through a StepGraph when `graphs`,
// else eagerly. The optimizer yaml decides the kernels. Returns each step's loss and the final
// parameters.
struct Curve {
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;
  int64_t replays = 0;
};

Curve train_default_job(const std::string& optimizer_yaml, bool graphs, bool capture_mode, int steps,
                        const std::string& criterion_yaml = "{name: arcface, args: {m: 0.5, s: 30}}") {
  auto [extractor, criterion, optimizer] = default_job_parts(criterion_yaml, optimizer_yaml);
  std::string problem;
  auto* capturable = oml::pipelines::capturable_optimizer(*optimizer, problem);
  std::unique_ptr<oml::pipelines::StepGraph> graph;
  if (graphs) {
    REQUIRE(problem.empty());
    graph = std::make_unique<oml::pipelines::StepGraph>(
        kGpu, *capturable, std::vector<torch::nn::Module*>{extractor.get(), criterion.get()});
  } else if (capture_mode) {
    capturable->enable_capture();
  }
  torch::manual_seed(12);
  const auto labels = torch::arange(10).repeat_interleave(16).pin_memory();
  std::vector<at::Tensor> images;
  for (int i = 0; i < 4; ++i) images.push_back(torch::randn({160, 3, 28, 28}).pin_memory());
  const auto whole_step = [&](const oml::data::LoadedBatch& batch) {
    auto out =
        criterion->forward(extractor->forward(batch.images.to(kGpu, true)), batch.labels.to(kGpu, true));
    oml::optim::zero_grad(*optimizer);
    out.loss.backward();
    optimizer->step();
    out.loss = out.loss.detach();
    return out;
  };
  const oml::data::DeviceCopier copier(kGpu);
  std::vector<at::Tensor> losses;
  for (int step = 0; step < steps; ++step) {
    oml::data::LoadedBatch batch;
    batch.images = images[static_cast<std::size_t>(step) % images.size()];
    batch.labels = labels;
    copier.to_device(batch);
    losses.push_back(graph ? graph->step(batch, whole_step).loss : whole_step(batch).loss);
  }
  Curve curve;
  for (const auto& loss : losses) curve.losses.push_back(loss.item<double>());
  for (const auto& p : extractor->parameters()) curve.parameters.push_back(p.detach().cpu());
  if (graph) curve.replays = graph->replays();
  return curve;
}

// The largest difference between two curves' losses over their first `steps` steps (all by
// default), relative to the loss.
double largest_relative_difference(const Curve& a, const Curve& b,
                                   std::size_t steps = std::numeric_limits<std::size_t>::max()) {
  REQUIRE(a.losses.size() == b.losses.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(steps, a.losses.size()); ++i)
    worst = std::max(worst, std::abs(a.losses[i] - b.losses[i]) / std::max(1e-6, std::abs(b.losses[i])));
  return worst;
}

// `deterministic: true` for one test case (oml::use_deterministic_algorithms, warnings only:
// an operation without a deterministic kernel still runs), the process's settings restored
// after, CUBLAS_WORKSPACE_CONFIG included. Without it two eager runs of the same 200 steps already differ:
// cuDNN's backward adds with atomics, and ArcFace (s = 30) amplifies the last bits into 0.3 of the loss
// (measured on an H200), which would hide any difference a graph makes.
class DeterministicScope {
 public:
  DeterministicScope()
      : before_(oml::determinism_state()),
        workspace_("CUBLAS_WORKSPACE_CONFIG",
                   before_.cublas_workspace_config.empty()
                       ? std::nullopt
                       : std::optional<std::string>(before_.cublas_workspace_config)) {
    oml::use_deterministic_algorithms(/*warn_only=*/true);
  }
  ~DeterministicScope() {
    auto& context = at::globalContext();
    context.setDeterministicAlgorithms(before_.algorithms, before_.warn_only);
    context.setDeterministicCuDNN(before_.cudnn_deterministic);
    context.setBenchmarkCuDNN(before_.cudnn_benchmark);
  }
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  oml::DeterminismState before_;
  oml::test::ScopedEnv workspace_;  // put back (or unset) after the destructor's body
};

// A curve replayed from a graph (or tried) against the same steps run eagerly: no further from
// them than a second eager run is (0 where every kernel is deterministic), give or take 1e-4.
void check_follows_eager(const Curve& tried, const Curve& eager, const Curve& eager_again) {
  const double to_eager = largest_relative_difference(tried, eager);
  const double eager_twice = largest_relative_difference(eager_again, eager);
  WARN("largest relative loss difference over " << eager.losses.size() << " steps: " << to_eager
                                                << " to the eager steps; two eager runs: " << eager_twice);
  CHECK(to_eager <= std::max(1e-4, 2 * eager_twice));
  REQUIRE(tried.parameters.size() == eager.parameters.size());
  for (std::size_t i = 0; i < tried.parameters.size(); ++i) {
    const double scale =
        std::max(1e-4, 2 * (eager_again.parameters[i] - eager.parameters[i]).abs().max().item<double>());
    CHECK((tried.parameters[i] - eager.parameters[i]).abs().max().item<double>() <= scale);
  }
}

}  // namespace

TEST_CASE("The default job's step replayed from a CUDA graph follows the eager steps' losses for 200 steps",
          "[gpu][cuda_graphs]") {
  require_gpu();
  const DeterministicScope deterministic;
  constexpr int kSteps = 200;
  const std::string adam = "{name: adam, args: {lr: 0.001}}";
  const Curve replayed = train_default_job(adam, /*graphs=*/true, true, kSteps);
  // The same kernels eagerly (the fused Adam with its lr on the device): the same numbers.
  const Curve same_kernels = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/true, kSteps);
  const Curve same_kernels_again = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/true, kSteps);
  CHECK(replayed.replays == kSteps - oml::pipelines::StepGraph::kWarmupSteps);
  check_follows_eager(replayed, same_kernels, same_kernels_again);
  // It trains: each replay read its own batch and took its own optimizer step.
  CHECK(replayed.losses.back() < replayed.losses.front());
  // PyTorch's default on CUDA (foreach Adam, the lr a number) rounds differently, which training
  // amplifies step by step: close over the first 20 steps.
  const Curve foreach = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/false, kSteps);
  const double to_foreach = largest_relative_difference(replayed, foreach, 20);
  WARN("foreach Adam: largest relative loss difference "
       << to_foreach << " over 20 steps, " << largest_relative_difference(replayed, foreach) << " over "
       << kSteps);
  CHECK(to_foreach <= 1e-3);
}

TEST_CASE("OML's triplet loss with hard mining is captured and replayed like the eager steps",
          "[gpu][cuda_graphs]") {
  require_gpu();
  const DeterministicScope deterministic;
  const std::string criterion =
      "{name: triplet_with_miner, args: {margin: 0.15, miner: {name: hard_triplets}}}";
  const std::string adam = "{name: adam, args: {lr: 0.001}}";
  const Curve replayed = train_default_job(adam, /*graphs=*/true, true, 40, criterion);
  const Curve eager = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/true, 40, criterion);
  const Curve eager_again = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/true, 40, criterion);
  CHECK(replayed.replays == 40 - oml::pipelines::StepGraph::kWarmupSteps);
  check_follows_eager(replayed, eager, eager_again);
}

TEST_CASE("A loss that reads values back cannot be captured: one warning, then the eager steps' results",
          "[gpu][cuda_graphs]") {
  require_gpu();
  // triplets_with_memory keeps its bank on the host: its capture synchronises and fails.
  const std::string criterion =
      "{name: triplet_with_miner, args: {margin: 0.2, miner: {name: triplets_with_memory, args: "
      "{bank_size_in_batches: 2, tri_expand_k: 2}}}}";
  const std::string adam = "{name: adam, args: {lr: 0.001}}";
  const DeterministicScope deterministic;
  const Curve tried = train_default_job(adam, /*graphs=*/true, true, 8, criterion);
  const Curve eager = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/true, 8, criterion);
  const Curve eager_again = train_default_job(adam, /*graphs=*/false, /*capture_mode=*/true, 8, criterion);
  CHECK(tried.replays == 0);
  check_follows_eager(tried, eager, eager_again);
}
