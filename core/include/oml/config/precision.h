#pragma once
// `precision:` — what the forward pass and the loss compute in (Lightning's `precision` flag).
// Parsed in run_config.cpp; applied by the autocast guards (oml/common/autocast.h).

#include <string>

namespace oml::config {

class Node;

/// Master weights, optimizer state, gradient sync, logged losses, metrics and written
/// embeddings stay float32 in every mode (docs/training.md#mixed-precision).
enum class Precision {
  fp32,  ///< `32`, `32-true` (the default)
  bf16,  ///< `bf16`, `bf16-mixed`: bfloat16 autocast (CPU: oneDNN kernels; CUDA)
  fp16,  ///< `16`, `16-mixed`: float16 autocast with a dynamic gradient scaler; CUDA only
};

/// The canonical spelling: "32", "bf16" or "16".
std::string precision_name(Precision precision);

/// `precision`'s value (a scalar such as 16, "bf16-mixed") as a Precision; ConfigError naming
/// the node and the accepted spellings otherwise.
Precision parse_precision(const Node& node);

}  // namespace oml::config
