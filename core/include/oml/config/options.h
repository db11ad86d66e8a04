#pragma once
// The run config's enumerations, parsed once (run_config.cpp) and taken as typed values by the
// layers that act on them: distributed (accelerator, gradient compression), the Trainer and the
// commands (pipeline, scheduler interval, checkpoint mode). No YAML here, so that those layers
// depend on the values and not on the config file.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace oml::config {

/// `num_workers:` above this is a mistake, not a configuration: each loader thread holds batches
/// in memory (data::LoaderOptions takes the same bound).
inline constexpr int kMaxLoaderWorkers = 256;

/// `pipeline:`
enum class Pipeline { extractor, pairwise };

/// `accelerator:` (OML's / Lightning's `gpu` is read as cuda).
enum class Accelerator {
  cpu,
  cuda,
  automatic,  ///< `auto`: cuda when a GPU is visible, else the CPU
};

/// `scheduling.scheduler_interval:` when the scheduler steps.
enum class SchedulerInterval { epoch, step };

/// `mode_for_checkpointing:` whether a larger or a smaller metric is better.
enum class CheckpointMode { max, min };

/// `ddp.gradient_compression:` the type gradient buckets travel in between ranks
/// (docs/ddp.md#gradient-compression), as PyTorch DDP's bf16/fp16 compression hooks:
/// none: float32 on the wire; bf16: float32's exponent range, 8 significant bits; fp16: 11
/// significant bits, values beyond ±65504 become infinite. bf16 and fp16 halve the bytes.
enum class GradientCompression { none, bf16, fp16 };

/// `memory_format:` how the model's 4-d tensors (convolution weights, hence their activations)
/// are laid out in memory, as PyTorch's `model.to(memory_format=...)`: contiguous (NCHW,
/// PyTorch's default) or channels_last (NHWC, the layout tensor-core convolutions run natively).
enum class MemoryFormat { contiguous, channels_last };

/// `float32_matmul_precision:` torch.set_float32_matmul_precision's three values: highest
/// (float32 products in float32, PyTorch's default), high (TF32 tensor cores on CUDA), medium
/// (also bfloat16 ones in oneDNN on the CPU).
enum class Float32MatmulPrecision { highest, high, medium };

/// The most ranks one machine may start (`devices:`, --nproc-per-node): far above any machine's
/// cores or GPUs, low enough that a typo (`devices: 100000`) is an error instead of a fork storm.
inline constexpr int kMaxRanksPerNode = 1024;

/// The config spellings, in enum order (the first is the canonical one of each value).
const std::vector<std::string>& pipeline_names();
const std::vector<std::string>& accelerator_names();
const std::vector<std::string>& scheduler_interval_names();
const std::vector<std::string>& checkpoint_mode_names();
const std::vector<std::string>& gradient_compression_names();
const std::vector<std::string>& memory_format_names();
const std::vector<std::string>& float32_matmul_precision_names();

std::string name(Pipeline value);
std::string name(Accelerator value);
std::string name(SchedulerInterval value);
std::string name(CheckpointMode value);
std::string name(GradientCompression value);
std::string name(MemoryFormat value);
std::string name(Float32MatmulPrecision value);

/// The value spelled `spelling` among `names` (one of the lists above), for command-line flags;
/// nullopt when it is none of them.
template <class Enum>
std::optional<Enum> from_name(const std::string& spelling, const std::vector<std::string>& names) {
  const auto found = std::find(names.begin(), names.end(), spelling);
  if (found == names.end()) return std::nullopt;
  return static_cast<Enum>(found - names.begin());
}

}  // namespace oml::config
