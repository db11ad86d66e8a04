#pragma once
// `ddp.gradient_compression`: the type gradient buckets travel in between ranks
// (docs/ddp.md#gradient-compression), as PyTorch DDP's bf16/fp16 compression hooks.
//
//   none  float32 on the wire (the default)
//   bf16  bfloat16: float32's exponent range, 8 significant bits; half the bytes
//   fp16  float16: 11 significant bits, values beyond ±65504 become infinite; half the bytes
//
// Only float32 buckets are compressed; buckets of other types (float64 parameters, say) are
// all-reduced as they are.

#include <optional>
#include <string>
#include <vector>

namespace oml::distributed {

enum class GradientCompression { none, bf16, fp16 };

/// "none", "bf16" and "fp16": the accepted values, in this order.
const std::vector<std::string>& gradient_compression_names();

/// The config spelling of `compression`.
std::string gradient_compression_name(GradientCompression compression);

/// The compression spelled `name`; nullopt when it is not one of gradient_compression_names().
std::optional<GradientCompression> parse_gradient_compression(const std::string& name);

}  // namespace oml::distributed
