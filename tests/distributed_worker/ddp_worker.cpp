// oml_ddp_worker: the multi-process scenarios of the DDP tests, started through the same
// command shell and launcher as oml-train:
//   oml_ddp_worker --nproc-per-node 3 --scenario sync --out DIR
// Each rank writes what it observed to DIR/rank<r>.txt (and .pt for trained weights).
#include <torch/torch.h>
#include <boost/program_options.hpp>

#include <csignal>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "oml/common/error.h"
#include "oml/distributed/device.h"
#include "oml/distributed/from_rank0.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/distributed/sync_dicts.h"
#include "oml/distributed/world.h"
#include "oml/metrics/metric_table.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/sharded_knn.h"
#include "scenarios.h"
#include "sharded_knn_scenario.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "shell/launch.h"

namespace po = boost::program_options;
namespace dist = oml::distributed;
using namespace oml::test::ddp;

namespace {

struct Args {
  std::string scenario, out;
  double timeout_s = 60;
  int victim = 1;
  int64_t steps = 5, batch = 12;
  int64_t accumulate = 1;  ///< train: micro-batches per optimizer step (accumulate_grad_batches)
  double bucket_mb = 25;
  int64_t check_every = 0;
  std::string compression = "none";
  bool fnmr = false;
  std::string backend = "faiss_ivf";
  std::string device = "cpu";
};

// The scenario's tensors on --device (cuda: every rank on cuda:0, the GPU tests' one GPU).
torch::Device device_of(const Args& a) { return torch::Device(a.device == "cuda" ? "cuda:0" : a.device); }

dist::SyncDict on_device(dist::SyncDict dict, torch::Device device) {
  for (auto& [key, value] : dict) {
    if (auto* t = std::get_if<at::Tensor>(&value)) *t = t->to(device);
  }
  return dict;
}

dist::GradientCompression compression_of(const Args& a) {
  const auto compression = oml::config::from_name<dist::GradientCompression>(
      a.compression, oml::config::gradient_compression_names());
  OML_CHECK(compression.has_value(), UsageError, "--compression must be none, bf16 or fp16");
  return *compression;
}

void write_text(const Args& a, int rank, const std::string& text) {
  std::ofstream(a.out + "/rank" + std::to_string(rank) + ".txt") << text;
}

int run_sync(dist::ProcessGroup& g, const Args& a) {
  auto merged = dist::sync_dicts(g, on_device(sync_input(g.rank()), device_of(a)));
  for (auto& [key, value] : merged) {
    if (auto* t = std::get_if<at::Tensor>(&value)) {
      OML_CHECK(t->device() == device_of(a), InternalError, "sync_dicts returned '", key, "' on ",
                t->device().str());
      *t = t->cpu();
    }
  }
  write_text(a, g.rank(), dump(merged));
  return 0;
}

// Each rank checks the merge itself (the dict is too large to dump) and writes
// "<key> equal <rows>" per key, or what differs.
int run_sync_large(dist::ProcessGroup& g, const Args& a) {
  const auto merged = dist::sync_dicts(g, sync_large_input(g.rank()));
  std::map<std::string, std::vector<at::Tensor>> parts;
  for (int r = 0; r < g.size(); ++r) {
    for (const auto& [key, value] : sync_large_input(r)) parts[key].push_back(std::get<at::Tensor>(value));
  }
  std::ostringstream out;
  for (const auto& [key, list] : parts) {
    const at::Tensor expected = torch::cat(list, 0);
    const at::Tensor& got = std::get<at::Tensor>(merged.at(key));
    const bool equal = got.sizes() == expected.sizes() && got.scalar_type() == expected.scalar_type() &&
                       got.is_contiguous() && torch::equal(got, expected);
    out << key << (equal ? " equal " : " DIFFERS ") << got.sizes() << "\n";
  }
  write_text(a, g.rank(), out.str());
  return 0;
}

int run_mismatch(dist::ProcessGroup& g, const Args& a) {
  dist::SyncDict dict{{"indices", std::vector<int64_t>{g.rank()}}};
  if (g.rank() == a.victim) dict["extra"] = std::vector<std::string>{"x"};
  if (g.rank() == a.victim) dict["indices"] = torch::tensor({g.rank()});
  dist::sync_dicts(g, dict);
  return 0;
}

// Padded sequential sharding of 7 items in batches of 2, as validation under DDP does it.
int run_accumulator(dist::ProcessGroup& g, const Args& a) {
  const int64_t n = 7, w = g.size();
  const int64_t per_rank = (n + w - 1) / w;
  std::vector<int64_t> mine;
  for (int64_t i = 0; i < per_rank; ++i) mine.push_back((g.rank() + i * w) % n);
  dist::Accumulator acc("indices");
  for (std::size_t start = 0; start < mine.size(); start += 2) {
    std::vector<int64_t> idx(mine.begin() + start, mine.begin() + std::min(mine.size(), start + 2));
    auto t = torch::tensor(idx, torch::kLong);
    std::vector<std::string> paths;
    std::vector<int64_t> labels;
    for (auto i : idx) {
      paths.push_back("img" + std::to_string(i) + ".jpg");
      labels.push_back(i % 3);
    }
    acc.update({{"indices", t},
                {"embeddings", t.to(torch::kFloat).unsqueeze(1) * torch::tensor({1.0f, -2.0f})},
                {"labels", labels},
                {"paths", paths}});
  }
  write_text(a, g.rank(), dump(acc.sync(g)));
  return 0;
}

// The k-NN split over the ranks, along each axis and inside compute_embedding_metrics; each rank
// writes the lists and metrics it received (sharded_knn_scenario.h).
int run_sharded_knn(dist::ProcessGroup& g, const Args& a) {
  oml::cli::register_builtins();
  const auto [queries, gallery] = sharded_knn_items();
  std::string text;
  for (const auto axis : {oml::retrieval::ShardAxis::queries, oml::retrieval::ShardAxis::gallery}) {
    text += std::string("axis ") + oml::retrieval::axis_name(axis) + "\n" +
            dump(oml::retrieval::retrieve_knn_sharded(g, queries, gallery, sharded_knn_options(), axis));
  }
  oml::metrics::EmbeddingMetricsOptions options;
  options.metrics = oml::metrics::configure_metrics(sharded_knn_metric_args(a.fnmr));
  options.memory_budget_mb = 0.01;  // many blocks
  options.group = &g;
  write_text(a, g.rank(),
             text + "metrics\n" + dump(oml::metrics::compute_embedding_metrics(sharded_knn_rows(), options)));
  return 0;
}

// An approximate backend split over the ranks by queries, alone and inside
// compute_embedding_metrics with its recall (sharded_knn_scenario.h). One thread per rank, as the
// expected text is computed: faiss_hnsw builds the same graph only then.
int run_sharded_backend(dist::ProcessGroup& g, const Args& a) {
  at::set_num_threads(1);
  write_text(a, g.rank(), sharded_backend_output(*sharded_backend(a.backend), &g));
  return 0;
}

int run_train(const std::shared_ptr<dist::ProcessGroup>& g, const Args& a) {
  OML_CHECK(a.accumulate >= 1 && a.batch % (g->size() * a.accumulate) == 0, UsageError,
            "--batch must be divisible by the world size x --accumulate");
  torch::manual_seed(100 + g->rank());  // different on purpose: the broadcast must fix it
  const torch::Device device = device_of(a);
  TinyNet net;
  net->to(device);
  torch::Tensor class_weights = torch::randn({5, 8}).to(device).requires_grad_();
  torch::Tensor partial = torch::tensor({1.0f, 2.0f, 3.0f}, device).requires_grad_();  // used by rank 0 only
  auto params = dist::named_trainable_parameters(*net, "net.");
  params.emplace_back("class_weights", class_weights);
  params.emplace_back("partial", partial);
  dist::GradientSync sync(g, params, {a.bucket_mb, a.check_every, compression_of(a)});
  sync.broadcast_from_rank0(dist::named_state(*net, "net."));

  std::vector<torch::Tensor> trained;
  for (auto& p : net->parameters()) trained.push_back(p);
  trained.push_back(class_weights);
  torch::optim::SGD optimizer(trained, torch::optim::SGDOptions(0.1).momentum(0.9));
  std::ostringstream log;
  // Each step's global batch goes as --accumulate micro-batches, each split over the ranks: rank
  // r takes rows [m x micro + r x local, +local) of micro-batch m.
  const int64_t micro = a.batch / a.accumulate;
  const int64_t local = micro / g->size();
  for (int64_t step = 0; step < a.steps; ++step) {
    auto [all_x, all_y] = global_batch(step, a.batch);
    optimizer.zero_grad();
    partial.mutable_grad() = torch::Tensor();
    for (int64_t m = 0; m < a.accumulate; ++m) {
      const torch::Tensor x = all_x.narrow(0, m * micro + g->rank() * local, local).to(device);
      const torch::Tensor y = all_y.narrow(0, m * micro + g->rank() * local, local).to(device);
      torch::Tensor loss = torch::cross_entropy_loss(net->forward(x).matmul(class_weights.t()), y);
      // `partial` gets a gradient on rank 0 only; it is not optimised, so its mean gradient
      // over ranks is 2 * [1, 2, 3] / W at every step.
      if (g->rank() == 0) loss = loss + (partial * partial).sum();
      // As the Trainer: loss / N, local backward for all but the step's last micro-batch.
      const bool last = m + 1 == a.accumulate;
      sync.accumulate_locally(!last);
      (loss / static_cast<double>(a.accumulate)).backward();
      if (last) sync.finish();
    }
    optimizer.step();
    if (step == 0) log << "partial_grad " << partial.grad().sum().item<double>() << "\n";
  }
  log << "unused_grad_defined " << net->unused->weight.grad().defined() << "\n";
  log << "buckets " << sync.bucket_count() << "\n";
  log << "synchronised_steps " << sync.steps() << "\n";
  write_text(a, g->rank(), log.str());
  for (auto& t : trained) t = t.detach().cpu();
  torch::save(trained, a.out + "/rank" + std::to_string(g->rank()) + ".pt");
  return 0;
}

// all_reduce_mean of each compressed_input case with --compression; every rank saves the
// results (the test recomputes the expected means from the inputs).
int run_compressed_mean(dist::ProcessGroup& g, const Args& a) {
  std::vector<torch::Tensor> results;
  for (int c = 0; c < kCompressedCases; ++c) {
    torch::Tensor t = compressed_input(g.rank(), c);
    dist::all_reduce_mean(g, t, compression_of(a));
    results.push_back(t);
  }
  torch::save(results, a.out + "/rank" + std::to_string(g.rank()) + ".pt");
  return 0;
}

// Rank 0's named values and decisions, two rounds; each rank writes what it received.
int run_from_rank0(dist::ProcessGroup& g, const Args& a) {
  std::ostringstream out;
  for (int round = 0; round < 2; ++round) {
    out << "round " << round << " decision "
        << dist::decision_from_rank0(g, device_of(a), from_rank0_decision(g.rank(), round)) << "\n"
        << dump_bits(dist::values_from_rank0(g, device_of(a), from_rank0_input(g.rank(), round)));
  }
  write_text(a, g.rank(), out.str());
  return 0;
}

// A loop of collectives in which the victim rank fails at step 5 in the chosen way.
int run_failure(dist::ProcessGroup& g, const Args& a) {
  for (int step = 0; step < 100000; ++step) {
    if (step == 5 && g.rank() == a.victim) {
      if (a.scenario == "kill") std::raise(SIGKILL);
      if (a.scenario == "throw") throw oml::DataError("df.csv, row 3: scenario 'throw' fails on purpose");
      if (a.scenario == "hang") std::this_thread::sleep_for(std::chrono::seconds(600));
    }
    torch::Tensor t = torch::ones({1000});
    g.all_reduce(t);
    OML_CHECK(t[0].item<float>() == static_cast<float>(g.size()), InternalError, "wrong all_reduce result");
    if (a.scenario == "wait") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml_ddp_worker";
  spec.summary = "multi-process scenarios for the DDP tests";
  spec.usage = "  oml_ddp_worker --nproc-per-node N --scenario NAME --out DIR";
  spec.needs_config = false;
  static Args args;
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    // clang-format off
    o.add_options()
      ("scenario", po::value(&args.scenario), "sync | sync_large | mismatch | accumulator | sharded_knn | sharded_backend | train | compressed_mean | from_rank0 | kill | throw | hang | wait")
      ("out", po::value(&args.out)->default_value("."), "folder for rank<r>.txt / rank<r>.pt")
      ("timeout", po::value(&args.timeout_s)->default_value(60), "ddp.timeout_s")
      ("victim", po::value(&args.victim)->default_value(1), "rank that fails / differs")
      ("steps", po::value(&args.steps)->default_value(5), "training steps")
      ("batch", po::value(&args.batch)->default_value(12), "global batch size")
      ("accumulate", po::value(&args.accumulate)->default_value(1), "train: micro-batches per step")
      ("bucket-mb", po::value(&args.bucket_mb)->default_value(25), "ddp.bucket_mb")
      ("check-every", po::value(&args.check_every)->default_value(0), "ddp.check_params_every")
      ("compression", po::value(&args.compression)->default_value("none"), "ddp.gradient_compression")
      ("fnmr", po::bool_switch(&args.fnmr), "sharded_knn: also fnmr@fmr (no split)")
      ("backend", po::value(&args.backend)->default_value("faiss_ivf"), "sharded_backend: the retrieval backend")
      ("device", po::value(&args.device)->default_value("cpu"), "sync, train: the tensors' device (cpu | cuda: cuda:0 on every rank)")
      ("tag", po::value<std::string>(), "ignored; lets a test find its processes");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) -> int {
    if (auto code = oml::cli::launch_if_requested(inv)) return *code;
    const dist::World world = dist::world_from_environment();
    // --device cuda: every rank on GPU 0, placed as oml-train places a run, which loads LibTorch's
    // CUDA half (the CUDA module) before the first CUDA tensor.
    if (args.device == "cuda") {
      dist::placement_for(oml::config::Accelerator::cuda, world,
                          std::vector<int64_t>(world.local_rank + 1, 0));
    }
    auto group = dist::ProcessGroup::connect(world, {args.timeout_s, "gloo"});
    const std::string& s = args.scenario;
    if (s == "sync") return run_sync(*group, args);
    if (s == "sync_large") return run_sync_large(*group, args);
    if (s == "mismatch") return run_mismatch(*group, args);
    if (s == "accumulator") return run_accumulator(*group, args);
    if (s == "sharded_knn") return run_sharded_knn(*group, args);
    if (s == "sharded_backend") return run_sharded_backend(*group, args);
    if (s == "train") return run_train(group, args);
    if (s == "compressed_mean") return run_compressed_mean(*group, args);
    if (s == "from_rank0") return run_from_rank0(*group, args);
    if (s == "kill" || s == "throw" || s == "hang" || s == "wait") return run_failure(*group, args);
    throw oml::UsageError("unknown --scenario '" + s + "'");
  };
  return oml::cli::run_command(argc, argv, spec);
}
