#include "oml/config/options.h"

namespace oml::config {

const std::vector<std::string>& pipeline_names() {
  static const std::vector<std::string> names{"extractor", "pairwise"};
  return names;
}

const std::vector<std::string>& accelerator_names() {
  static const std::vector<std::string> names{"cpu", "cuda", "auto"};
  return names;
}

const std::vector<std::string>& scheduler_interval_names() {
  static const std::vector<std::string> names{"epoch", "step"};
  return names;
}

const std::vector<std::string>& checkpoint_mode_names() {
  static const std::vector<std::string> names{"max", "min"};
  return names;
}

const std::vector<std::string>& gradient_compression_names() {
  static const std::vector<std::string> names{"none", "bf16", "fp16"};
  return names;
}

const std::vector<std::string>& memory_format_names() {
  static const std::vector<std::string> names{"contiguous", "channels_last"};
  return names;
}

const std::vector<std::string>& float32_matmul_precision_names() {
  static const std::vector<std::string> names{"highest", "high", "medium"};
  return names;
}

std::string name(Pipeline value) { return pipeline_names().at(static_cast<std::size_t>(value)); }
std::string name(Accelerator value) { return accelerator_names().at(static_cast<std::size_t>(value)); }
std::string name(SchedulerInterval value) {
  return scheduler_interval_names().at(static_cast<std::size_t>(value));
}
std::string name(CheckpointMode value) { return checkpoint_mode_names().at(static_cast<std::size_t>(value)); }
std::string name(GradientCompression value) {
  return gradient_compression_names().at(static_cast<std::size_t>(value));
}

std::string name(MemoryFormat value) { return memory_format_names().at(static_cast<std::size_t>(value)); }

std::string name(Float32MatmulPrecision value) {
  return float32_matmul_precision_names().at(static_cast<std::size_t>(value));
}

}  // namespace oml::config
