// bench_ddp: figures for the multi-process runtime (docs/benchmarks.md, "DDP runtime").
//
//   bench_ddp --nproc-per-node 2 --what sync_dicts [--rows 100000 --dim 512 --repeats 5]
//   bench_ddp --nproc-per-node 2 --what sync_dicts_parts   (where sync_dicts' time goes)
//   bench_ddp --nproc-per-node 2 --what allreduce
//   bench_ddp --nproc-per-node 2 --what step [--batch 256 --steps 30] [--no-sync]
//   bench_ddp --what step --batch 256                      (the single-process baseline)
//   bench_ddp --nproc-per-node 2 --what resnet18 [--batch 16 --side 64 --steps 5 --rounds 3
//             --compressions none,bf16 --threads 1]   (gradient compression and overlap; bench/slow_link.sh
//                                                       runs it on 2 nodes over a rate-limited link)
//
// Rank 0 prints the figures; every rank runs the same collectives.
#include <torch/torch.h>
#include <boost/program_options.hpp>

#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>

#include "benchmark.h"
#include "oml/common/runtime.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/distributed/sync_dicts.h"
#include "oml/distributed/world.h"
#include "oml/models/extractor.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "shell/launch.h"

namespace ddp_benchmark {

namespace po = boost::program_options;
namespace dist = oml::distributed;

namespace {

struct Args {
  std::string what = "sync_dicts";
  int64_t rows = 100000, dim = 512, repeats = 5, batch = 256, steps = 30;
  bool no_sync = false;
  int64_t side = 64, rounds = 3, threads = 1;
  std::string compressions = "none,bf16";
};
Args args;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void bench_sync_dicts(dist::ProcessGroup& g) {
  torch::manual_seed(g.rank());
  const dist::SyncDict local{{"embeddings", torch::randn({args.rows, args.dim})},
                             {"indices", torch::arange(args.rows, torch::kLong) + g.rank() * args.rows}};
  std::vector<double> times;
  for (int64_t i = 0; i < args.repeats + 1; ++i) {
    g.barrier();
    const auto start = Clock::now();
    const auto merged = dist::sync_dicts(g, local);
    const double t = seconds_since(start);
    if (i > 0) times.push_back(t);  // the first call warms up connections and allocator
    OML_CHECK(dist::row_count(merged.at("embeddings")) == args.rows * g.size(), InternalError, "bad merge");
  }
  if (g.rank() == 0) {
    const double mb = args.rows * args.dim * 4.0 / 1e6;
    std::printf(
        "sync_dicts %lld x %lld float32 per rank (%.1f MB), %d ranks: median %.3f s, min %.3f s over %lld "
        "runs\n",
        static_cast<long long>(args.rows), static_cast<long long>(args.dim), mb, g.size(), median(times),
        *std::min_element(times.begin(), times.end()), static_cast<long long>(args.repeats));
  }
}

// Where sync_dicts' time goes: the parts of a gather of one rows x dim float32 tensor per rank,
// each timed alone (median over --repeats).
void bench_sync_dicts_parts(dist::ProcessGroup& g) {
  torch::manual_seed(g.rank());
  const torch::Tensor local = torch::randn({args.rows, args.dim});
  const int n = g.size();
  auto timed = [&](const char* name, const std::function<void()>& body) {
    std::vector<double> times;
    for (int64_t i = 0; i < args.repeats + 1; ++i) {
      g.barrier();
      const auto start = Clock::now();
      body();
      if (i > 0) times.push_back(seconds_since(start));
    }
    if (g.rank() == 0)
      std::printf("  %-58s median %8.4f s, min %8.4f s\n", name, median(times),
                  *std::min_element(times.begin(), times.end()));
  };
  timed("all_gather_bytes of 64 bytes (latency)", [&] { g.all_gather_bytes(std::string(64, 'x')); });
  timed("empty(all rows) + zero_ (page faults of the result)", [&] {
    torch::empty({args.rows * n, args.dim}).zero_();
  });
  timed("empty(all rows) + copy_ of own rows", [&] {
    torch::empty({args.rows * n, args.dim}).narrow(0, 0, args.rows).copy_(local);
  });
  auto empty_huge = [](int64_t rows, int64_t dim) {
    const std::size_t bytes = static_cast<std::size_t>(rows * dim * 4);
    const std::size_t huge = std::size_t{1} << 21;
    const std::size_t size = (bytes + huge - 1) / huge * huge;
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(p, size, MADV_HUGEPAGE);
    return torch::from_blob(
        p, {rows, dim}, [size](void* q) { munmap(q, size); }, torch::kFloat);
  };
  timed("mmap+MADV_HUGEPAGE(all rows) + zero_", [&] { empty_huge(args.rows * n, args.dim).zero_(); });
  timed("mmap+MADV_HUGEPAGE(all rows) + copy_ of own rows",
        [&] { empty_huge(args.rows * n, args.dim).narrow(0, 0, args.rows).copy_(local); });
  timed("all_gather_concat (sync_dicts' tensor path)", [&] { g.all_gather_concat(local); });
  timed("broadcast per rank, one after another, into the result", [&] {
    torch::Tensor whole = torch::empty({args.rows * n, args.dim});
    whole.narrow(0, g.rank() * args.rows, args.rows).copy_(local);
    for (int r = 0; r < n; ++r) {
      torch::Tensor part = whole.narrow(0, r * args.rows, args.rows);
      g.broadcast(part, r);
    }
  });
}

void bench_allreduce(dist::ProcessGroup& g) {
  if (g.rank() == 0)
    std::printf("%12s %10s %12s %12s\n", "size (MB)", "time (ms)", "algbw (GB/s)", "busbw (GB/s)");
  for (double mb : {0.25, 1.0, 4.0, 25.0, 100.0}) {
    torch::Tensor t = torch::ones({static_cast<int64_t>(mb * 1e6 / 4)});
    std::vector<double> times;
    for (int64_t i = 0; i < args.repeats + 1; ++i) {
      g.barrier();
      const auto start = Clock::now();
      g.all_reduce(t);
      if (i > 0) times.push_back(seconds_since(start));
    }
    const double s = median(times);
    const double algbw = mb / 1e3 / s;
    if (g.rank() == 0) {
      std::printf("%12.2f %10.2f %12.2f %12.2f\n", mb, s * 1e3, algbw,
                  algbw * 2.0 * (g.size() - 1) / g.size());
    }
  }
}

// A small MLP without batch-dependent layers: 512 -> 1024 -> 1024 -> 128 (~1.7 M parameters).
void bench_step(const std::shared_ptr<dist::ProcessGroup>& g) {
  OML_CHECK(args.batch % g->size() == 0, UsageError, "--batch must be divisible by the ranks");
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(512, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                            torch::nn::ReLU(), torch::nn::Linear(1024, 128));
  std::unique_ptr<dist::GradientSync> sync;
  if (!args.no_sync) {
    sync = std::make_unique<dist::GradientSync>(g, dist::named_trainable_parameters(*net));
    sync->broadcast_from_rank0();
  }
  torch::optim::SGD optimizer(net->parameters(), 0.01);
  const int64_t local = args.batch / g->size();
  const torch::Tensor x = torch::randn({local, 512}), y = torch::randn({local, 128});
  std::vector<double> times;
  for (int64_t i = 0; i < args.steps + 5; ++i) {
    const auto start = Clock::now();
    optimizer.zero_grad();
    torch::mse_loss(net->forward(x), y).backward();
    if (sync) sync->finish();
    optimizer.step();
    if (i >= 5) times.push_back(seconds_since(start));
  }
  if (g->rank() == 0) {
    std::printf(
        "step: %d rank(s), global batch %lld (local %lld), %d thread(s)/rank, sync %s: median %.2f ms/step\n",
        g->size(), static_cast<long long>(args.batch), static_cast<long long>(local),
        torch::get_num_threads(), args.no_sync ? "off" : "on", median(times) * 1e3);
  }
}

// resnet18 training steps (synthetic images, an embedding regression loss, SGD) with each
// gradient compression, alternated over rounds. Per step: forward + loss, backward (the bucket
// all-reduces start during it), the wait in GradientSync::finish() (the communication backward
// did not hide) and the optimizer step. Then, with no backward running, the same buckets
// all-reduced alone: the communication's full time. Hidden share = 1 - wait / alone.
void bench_resnet18(const std::shared_ptr<dist::ProcessGroup>& g) {
  std::vector<dist::GradientCompression> variants;
  for (const std::string& name : oml::split(args.compressions, ',')) {
    const auto c =
        oml::config::from_name<dist::GradientCompression>(name, oml::config::gradient_compression_names());
    OML_CHECK(c.has_value(), UsageError, "--compressions: '", name, "' is not none, bf16 or fp16");
    variants.push_back(*c);
  }
  oml::cli::register_builtins();
  const auto doc =
      oml::config::Document::from_string("extractor: {name: resnet, args: {arch: resnet18}}", "<bench_ddp>");
  torch::manual_seed(0);
  auto model =
      oml::registries().extractors.create(oml::config::parse_component(doc.root()["extractor"], "extractor"));
  model->train();
  torch::manual_seed(1 + g->rank());  // each rank its own data
  const torch::Tensor x = torch::randn({args.batch, 3, args.side, args.side});
  const torch::Tensor target = torch::randn({args.batch, model->feat_dim()});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-4).momentum(0.9));
  const auto params = dist::named_trainable_parameters(*model, "model.");
  int64_t param_count = 0;
  for (const auto& [name, p] : params) param_count += p.numel();
  if (g->rank() == 0) {
    std::printf(
        "resnet18: %lld parameters (%.1f MB float32), %d rank(s), batch %lld per rank, %lldx%lld, %d "
        "thread(s)/rank, "
        "%lld steps x %lld rounds\n",
        static_cast<long long>(param_count), param_count * 4.0 / 1e6, g->size(),
        static_cast<long long>(args.batch), static_cast<long long>(args.side),
        static_cast<long long>(args.side), torch::get_num_threads(), static_cast<long long>(args.steps),
        static_cast<long long>(args.rounds));
    std::printf("%-6s %-5s %8s %9s %9s %9s %9s %9s %8s\n", "round", "comp", "steps/s", "fwd ms", "bwd ms",
                "wait ms", "opt ms", "alone ms", "hidden");
  }
  struct Figures {
    std::vector<double> steps_per_s, hidden;
  };
  std::vector<Figures> figures(variants.size());
  for (int64_t round = 0; round < args.rounds; ++round) {
    for (std::size_t v = 0; v < variants.size(); ++v) {
      dist::GradientSyncOptions options;
      options.compression = variants[v];
      dist::GradientSync sync(g, params, options);
      sync.broadcast_from_rank0();
      double fwd = 0, bwd = 0, opt = 0, wait = 0, total = 0;
      for (int64_t step = 0; step < args.steps + 1; ++step) {  // step 0 warms up
        g->barrier();
        const double wait_before = sync.wait_seconds();
        const auto t0 = Clock::now();
        optimizer.zero_grad();
        torch::Tensor loss = torch::mse_loss(model->forward(x), target);
        const auto t1 = Clock::now();
        loss.backward();
        const auto t2 = Clock::now();
        sync.finish();
        const auto t3 = Clock::now();
        optimizer.step();
        const auto t4 = Clock::now();
        if (step == 0) continue;
        fwd += std::chrono::duration<double>(t1 - t0).count();
        bwd += std::chrono::duration<double>(t2 - t1).count();
        wait += sync.wait_seconds() - wait_before;
        opt += std::chrono::duration<double>(t4 - t3).count();
        total += std::chrono::duration<double>(t4 - t0).count();
      }
      // The same buckets, all-reduced with nothing else running.
      std::vector<torch::Tensor> buckets;
      for (int64_t n : sync.bucket_numels()) buckets.push_back(torch::randn({n}));
      std::vector<double> alone;
      for (int repeat = 0; repeat < 3; ++repeat) {
        g->barrier();
        const auto start = Clock::now();
        for (auto& b : buckets) dist::all_reduce_mean(*g, b, variants[v]);
        alone.push_back(seconds_since(start));
      }
      const double n = static_cast<double>(args.steps);
      const double alone_s = median(alone);
      const double hidden = alone_s > 0 ? std::max(0.0, 1.0 - wait / n / alone_s) : 0.0;
      figures[v].steps_per_s.push_back(n / total);
      figures[v].hidden.push_back(hidden);
      if (g->rank() == 0) {
        std::printf("%-6lld %-5s %8.3f %9.1f %9.1f %9.1f %9.1f %9.1f %7.0f%%\n",
                    static_cast<long long>(round + 1), oml::config::name(variants[v]).c_str(), n / total,
                    fwd / n * 1e3, bwd / n * 1e3, wait / n * 1e3, opt / n * 1e3, alone_s * 1e3, hidden * 100);
        std::fflush(stdout);
      }
    }
  }
  if (g->rank() == 0) {
    std::printf("median over %lld rounds:\n", static_cast<long long>(args.rounds));
    for (std::size_t v = 0; v < variants.size(); ++v) {
      std::printf("  %-5s %.3f steps/s (%.2fx %s), communication hidden behind backward %.0f%%\n",
                  oml::config::name(variants[v]).c_str(), median(figures[v].steps_per_s),
                  median(figures[v].steps_per_s) / median(figures[0].steps_per_s),
                  oml::config::name(variants[0]).c_str(), median(figures[v].hidden) * 100);
    }
  }
}

}  // namespace

OML_BENCHMARK(ddp) {
  oml::cli::CommandSpec spec;
  spec.name = "bench_ddp";
  spec.summary =
      "DDP runtime benchmarks: sync_dicts, all-reduce bandwidth, per-step overhead, resnet18 with gradient "
      "compression";
  spec.usage = "  bench_ddp [--nproc-per-node N] --what sync_dicts|sync_dicts_parts|allreduce|step|resnet18";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    // clang-format off
    o.add_options()
      ("what", po::value(&args.what)->default_value("sync_dicts"), "sync_dicts | sync_dicts_parts | allreduce | step | resnet18")
      ("rows", po::value(&args.rows)->default_value(100000), "sync_dicts: rows per rank")
      ("dim", po::value(&args.dim)->default_value(512), "sync_dicts: embedding size")
      ("repeats", po::value(&args.repeats)->default_value(5), "timed repetitions")
      ("batch", po::value(&args.batch)->default_value(256), "step: global batch")
      ("steps", po::value(&args.steps)->default_value(30), "step: timed steps")
      ("no-sync", po::bool_switch(&args.no_sync), "step: skip gradient synchronisation (compute only)")
      ("side", po::value(&args.side)->default_value(64), "resnet18: image side")
      ("rounds", po::value(&args.rounds)->default_value(3), "resnet18: rounds over the compressions")
      ("compressions", po::value(&args.compressions)->default_value("none,bf16"), "resnet18: compressions to alternate")
      ("threads", po::value(&args.threads)->default_value(1), "resnet18: intra-op threads per rank (0: cores / local ranks)");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) -> int {
    if (auto code = oml::cli::launch_if_requested(inv)) return *code;
    const dist::World world = dist::world_from_environment();
    oml::configure_threads(args.what == "resnet18" ? static_cast<int>(args.threads) : 0,
                           world.local_world_size);
    auto group = dist::ProcessGroup::connect(world, {120.0, "gloo"});
    if (args.what == "sync_dicts") {
      bench_sync_dicts(*group);
    } else if (args.what == "sync_dicts_parts") {
      bench_sync_dicts_parts(*group);
    } else if (args.what == "allreduce") {
      bench_allreduce(*group);
    } else if (args.what == "step") {
      bench_step(group);
    } else if (args.what == "resnet18") {
      bench_resnet18(group);
    } else {
      throw oml::UsageError(
          "--what must be sync_dicts, sync_dicts_parts, allreduce, step or resnet18, got '" + args.what +
          "'");
    }
    return 0;
  };
  return oml::cli::run_command(argc, argv, spec);
}

}  // namespace ddp_benchmark
