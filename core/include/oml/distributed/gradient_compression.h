#pragma once
// `ddp.gradient_compression`: the type gradient buckets travel in between ranks
// (docs/ddp.md#gradient-compression). The value is the run config's (oml/config/options.h); only
// float32 buckets are compressed, buckets of other types (float64 parameters, say) are
// all-reduced as they are.

#include "oml/config/options.h"

namespace oml::distributed {

using config::GradientCompression;

}  // namespace oml::distributed
