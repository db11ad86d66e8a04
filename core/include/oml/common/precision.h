#pragma once
// What the forward pass and the loss compute in (`precision:`, Lightning's flag): the modes the
// autocast guards apply (oml/common/autocast.h). The config spells and parses them
// (oml/config/precision.h).

#include <string>

namespace oml {

/// Master weights, optimizer state, gradient sync, logged losses, metrics and written
/// embeddings stay float32 in every mode (docs/training.md#mixed-precision).
enum class Precision {
  fp32,  ///< `32`, `32-true` (the default)
  bf16,  ///< `bf16`, `bf16-mixed`: bfloat16 autocast (CPU: oneDNN kernels; CUDA)
  fp16,  ///< `16`, `16-mixed`: float16 autocast with a dynamic gradient scaler; CUDA only
};

/// The canonical spelling: "32", "bf16" or "16".
std::string precision_name(Precision precision);

}  // namespace oml
