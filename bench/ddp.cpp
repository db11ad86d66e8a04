// bench_ddp: figures for the multi-process runtime (docs/benchmarks.md, "DDP runtime").
//
//   bench_ddp --nproc-per-node 2 --what sync_dicts [--rows 100000 --dim 512 --repeats 5]
//   bench_ddp --nproc-per-node 2 --what sync_dicts_parts   (where sync_dicts' time goes)
//   bench_ddp --nproc-per-node 2 --what allreduce
//   bench_ddp --nproc-per-node 2 --what step [--batch 256 --steps 30] [--no-sync]
//   bench_ddp --what step --batch 256                      (the single-process baseline)
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

#include "cli.h"
#include "launch.h"
#include "oml/common/runtime.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/distributed/sync_dicts.h"
#include "oml/distributed/world.h"

namespace po = boost::program_options;
namespace dist = oml::distributed;

namespace {

struct Args {
  std::string what = "sync_dicts";
  int64_t rows = 100000, dim = 512, repeats = 5, batch = 256, steps = 30;
  bool no_sync = false;
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

}  // namespace

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "bench_ddp";
  spec.summary = "DDP runtime benchmarks: sync_dicts, all-reduce bandwidth, per-step overhead";
  spec.usage = "  bench_ddp [--nproc-per-node N] --what sync_dicts|sync_dicts_parts|allreduce|step";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    // clang-format off
    o.add_options()
      ("what", po::value(&args.what)->default_value("sync_dicts"), "sync_dicts | sync_dicts_parts | allreduce | step")
      ("rows", po::value(&args.rows)->default_value(100000), "sync_dicts: rows per rank")
      ("dim", po::value(&args.dim)->default_value(512), "sync_dicts: embedding size")
      ("repeats", po::value(&args.repeats)->default_value(5), "timed repetitions")
      ("batch", po::value(&args.batch)->default_value(256), "step: global batch")
      ("steps", po::value(&args.steps)->default_value(30), "step: timed steps")
      ("no-sync", po::bool_switch(&args.no_sync), "step: skip gradient synchronisation (compute only)");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) -> int {
    if (auto code = oml::cli::launch_if_requested(inv)) return *code;
    const dist::World world = dist::world_from_environment();
    oml::configure_threads(0, world.local_world_size);
    auto group = dist::ProcessGroup::connect(world, {120.0, "gloo"});
    if (args.what == "sync_dicts") {
      bench_sync_dicts(*group);
    } else if (args.what == "sync_dicts_parts") {
      bench_sync_dicts_parts(*group);
    } else if (args.what == "allreduce") {
      bench_allreduce(*group);
    } else if (args.what == "step") {
      bench_step(group);
    } else {
      throw oml::UsageError("--what must be sync_dicts, sync_dicts_parts, allreduce or step, got '" +
                            args.what + "'");
    }
    return 0;
  };
  return oml::cli::run_command(argc, argv, spec);
}
