#include "runtime/run_context.h"

#include <torch/torch.h>

#include <cstdlib>

#include "oml/common/determinism.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/runtime.h"
#include "oml/config/document.h"
#include "oml/data/dataframe.h"
#include "oml/distributed/device.h"
#include "oml/distributed/launcher.h"
#include "oml/distributed/process_group.h"
#include "oml/models/zoo.h"
#include "oml/registry/plugin.h"
#include "runtime/progress.h"

namespace oml::pipelines {

namespace {

// The line of `text` at `index` (0-based), or "(nothing)" past its end.
std::string line_at(const std::string& text, std::size_t index) {
  std::size_t begin = 0;
  for (std::size_t i = 0; i < index; ++i) {
    begin = text.find('\n', begin);
    if (begin == std::string::npos) return "(nothing)";
    ++begin;
  }
  if (begin >= text.size()) return "(nothing)";
  return text.substr(begin, text.find('\n', begin) - begin);
}

// The first line (0-based) where a and b differ.
std::size_t first_different_line(const std::string& a, const std::string& b) {
  std::size_t line = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i) {
    if (a[i] == '\n') ++line;
  }
  return line;
}

// Every rank must run the same resolved config: machines started with different files or --set
// values would train different models, or hang in mismatched collectives. Compared once, right
// after the rendezvous; a difference is a ConfigError (exit 2) on every rank, naming the ranks and
// the first line that differs from rank 0's.
void check_same_config(distributed::ProcessGroup& group, const std::string& yaml) {
  const std::vector<std::string> all = group.all_gather_bytes(yaml);
  std::vector<int> differing;
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) differing.push_back(static_cast<int>(r));
  }
  if (differing.empty()) return;
  const int r = differing.front();
  const std::size_t line = first_different_line(all[r], all[0]);
  std::string ranks;
  for (const int d : differing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(d);
  throw ConfigError("the resolved config of rank" + std::string(differing.size() > 1 ? "s " : " ") + ranks +
                    " differs from rank 0's (every rank, on every machine, must run the same config): line " +
                    std::to_string(line + 1) + " is `" + line_at(all[r], line) + "` on rank " +
                    std::to_string(r) + " but `" + line_at(all[0], line) + "` on rank 0");
}

// Lightning's `benchmark` (after `deterministic`, which turns it off: Lightning's order) and
// torch.set_float32_matmul_precision: process-wide ATen settings, set on every rank alike. Each
// rank logs what ATen then reports in force.
void apply_speed_settings(const config::RunConfig& config) {
  const auto benchmark = config.controls.benchmark;
  const bool precision_given = config.float32_matmul_precision != config::Float32MatmulPrecision::highest;
  if (!benchmark && !precision_given) return;
  auto& context = at::globalContext();
  if (benchmark) {
    if (*benchmark && config.controls.deterministic != config::Determinism::off) {
      oml::log::warn(
          "benchmark: true with deterministic: cuDNN's benchmark search picks algorithms by timing them, and "
          "PyTorch ignores cuDNN's deterministic setting while it is on (as Lightning warns): runs may "
          "differ");
    }
    context.setBenchmarkCuDNN(*benchmark);
  }
  if (precision_given) context.setFloat32MatmulPrecision(config::name(config.float32_matmul_precision));
  // ATen's enumeration has torch's three values in the config's order.
  const auto in_force = static_cast<config::Float32MatmulPrecision>(context.float32MatmulPrecision());
  oml::log::info(std::string("cuDNN benchmark ") + (context.benchmarkCuDNN() ? "on" : "off") +
                 ", float32 matmul precision " + config::name(in_force) +
                 (context.allowTF32CuBLAS() ? " (cuBLAS may use TF32)" : ""));
}

}  // namespace

RunContext start_run(const config::RunConfig& config) {
  RunContext ctx;
  models::set_weights_dir(config.weights_dir);
  ctx.world = distributed::world_from_environment();
  if (ctx.world.is_distributed()) {
    // The oml launcher prefixes every line itself; under torchrun/srun the rank says who it is.
    const bool prefixed = std::getenv(distributed::kPrefixedByLauncher) != nullptr;
    oml::log::init(prefixed ? -1 : ctx.world.rank);
    if (!ctx.is_main()) Progress::set_default_mode(ProgressMode::quiet);
  }
  // Lightning's `deterministic`, on every rank alike, before anything touches CUDA: cuBLAS reads
  // its workspace setting when it creates its first handle. Each rank logs what ATen reports in
  // force in its process.
  if (config.controls.deterministic != config::Determinism::off) {
    const bool warn_only = config.controls.deterministic == config::Determinism::warn;
    oml::use_deterministic_algorithms(warn_only);
    oml::log::info("deterministic mode: " + oml::describe(oml::determinism_state()));
  }
  apply_speed_settings(config);
  const distributed::Placement placement =
      distributed::placement_for(config.accelerator, ctx.world, config.device_ids);
  ctx.device = placement.device;
  ctx.precision = config.precision;
  if (ctx.precision == config::Precision::fp16 && ctx.device.is_cpu()) {
    // parse_run_config catches `accelerator: cpu`; this is `auto` without a visible GPU.
    config.source["precision"].fail(
        "precision 16 (float16 autocast with a gradient scaler) needs a GPU, and accelerator: " +
        config::name(config.accelerator) + " resolved to the CPU; use precision: bf16 on the CPU");
  }
  ctx.threads = configure_threads(static_cast<int>(config.num_threads), ctx.world.local_world_size);
  if (ctx.world.is_distributed()) {
    distributed::GroupOptions options;
    options.timeout_s = config.ddp.timeout_s;
    options.backend = placement.backend;
    ctx.group = distributed::ProcessGroup::connect(ctx.world, options);
    if (config.source.defined()) {
      // The plugins (from --plugin too) by name and version: their paths may differ by machine.
      std::string plugins;
      for (const LoadedPlugin& plugin : loaded_plugins())
        plugins += (plugins.empty() ? "" : ", ") + plugin.name + " " + plugin.version;
      check_same_config(*ctx.group, config::dump_yaml(config.source.yaml()) +
                                        "# plugins loaded: " + (plugins.empty() ? "none" : plugins) + "\n");
    }
    oml::log::info("joined " + distributed::describe(ctx.world) + ", " + std::to_string(ctx.threads) +
                   " threads");
  } else {
    ctx.group = distributed::ProcessGroup::single();
  }
  return ctx;
}

void check_same_dataframe(const RunContext& context, const data::Dataframe& dataframe) {
  if (!context.world.is_distributed()) return;
  const std::string mine = "train rows " + std::to_string(dataframe.train().size()) + ", validation rows " +
                           std::to_string(dataframe.validation().size()) + ", digest " +
                           std::to_string(dataframe.digest());
  const std::vector<std::string> all = context.group->all_gather_bytes(mine);
  std::string differing;
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (differing.empty()) return;
  const std::size_t r = std::stoul(differing.substr(0, differing.find(',')));
  throw DataError(dataframe.file() + " holds other rows on rank" +
                  (differing.find(',') == std::string::npos ? " " : "s ") + differing + " than on rank 0 (" +
                  all[r] + " on rank " + std::to_string(r) + ", " + all[0] +
                  " on rank 0): every machine must read the same dataframe, with the same rows in the same "
                  "order; copy rank 0's file to the others");
}

void RunContext::rank0_only(const std::function<void()>& work) const {
  if (is_main()) work();
  group->barrier();
}

std::string RunContext::from_rank0(const std::string& text) const {
  if (!world.is_distributed()) return text;
  return group->all_gather_bytes(is_main() ? text : std::string()).at(0);
}

}  // namespace oml::pipelines
