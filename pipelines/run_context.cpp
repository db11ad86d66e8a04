#include "run_context.h"

#include <torch/torch.h>

#include <cstdlib>

#include "oml/common/logging.h"
#include "oml/common/runtime.h"
#include "oml/distributed/device.h"
#include "oml/distributed/launcher.h"
#include "oml/distributed/process_group.h"
#include "progress.h"

namespace oml::pipelines {

RunContext start_run(const config::RunConfig& config) {
  RunContext ctx;
  ctx.world = distributed::world_from_environment();
  if (ctx.world.is_distributed()) {
    // The oml launcher prefixes every line itself; under torchrun/srun the rank says who it is.
    const bool prefixed = std::getenv(distributed::kPrefixedByLauncher) != nullptr;
    oml::log::init(prefixed ? -1 : ctx.world.rank);
    if (!ctx.is_main()) Progress::set_default_mode(ProgressMode::quiet);
  }
  const distributed::Placement placement =
      distributed::placement_for(config.accelerator, ctx.world, config.device_ids);
  ctx.device = placement.device;
  ctx.precision = config.precision;
  if (ctx.precision == config::Precision::fp16 && ctx.device.is_cpu()) {
    // parse_run_config catches `accelerator: cpu`; this is `auto` without a visible GPU.
    config.source["precision"].fail(
        "precision 16 (float16 autocast with a gradient scaler) needs a GPU, and accelerator: " +
        config.accelerator + " resolved to the CPU; use precision: bf16 on the CPU");
  }
  ctx.threads = configure_threads(static_cast<int>(config.num_threads), ctx.world.local_world_size);
  if (ctx.world.is_distributed()) {
    distributed::GroupOptions options;
    options.timeout_s = config.ddp.timeout_s;
    options.backend = placement.backend;
    ctx.group = distributed::ProcessGroup::connect(ctx.world, options);
    oml::log::info("joined " + distributed::describe(ctx.world) + ", " + std::to_string(ctx.threads) +
                   " threads");
  } else {
    ctx.group = distributed::ProcessGroup::single();
  }
  return ctx;
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
