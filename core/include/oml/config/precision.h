#pragma once
// `precision:` — what the forward pass and the loss compute in (Lightning's `precision` flag).
// The modes are common's (oml/common/precision.h: the autocast guards apply them, and common
// depends on nothing); the config reads their spellings here, in run_config.cpp.

#include "oml/common/precision.h"

namespace oml::config {

class Node;

/// The config's name for the modes (`config::Precision::bf16`), as RunConfig holds them.
using Precision = ::oml::Precision;
using ::oml::precision_name;

/// `precision`'s value (a scalar such as 16, "bf16-mixed") as a Precision; ConfigError naming
/// the node and the accepted spellings otherwise.
Precision parse_precision(const Node& node);

}  // namespace oml::config
