#pragma once
// The composition root: the one place that knows every built-in component. Each layer of
// liboml_core offers a register_builtin_*() function and knows nothing of the others; the
// commands, tests and benchmarks call register_builtins() once before reading a config.

namespace oml::cli {

/// Registers every built-in component: transforms, models, losses and miners, optimizers and
/// schedulers, postprocessors, retrieval backends, metrics, loggers and the built-in samplers.
/// Idempotent. Never from static initialisers (a linker may drop them).
void register_builtins();

}  // namespace oml::cli
