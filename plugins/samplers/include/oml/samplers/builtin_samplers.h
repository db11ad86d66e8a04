#pragma once
// Registration of the built-in samplers, and building the sampler a config names.

#include <memory>
#include <optional>

#include "oml/config/reader.h"
#include "oml/data/sampler.h"
#include "oml/registry/registry.h"

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::samplers {

/// Adds sequential, random, balance, category_balance and distinct_category_balance to
/// `registries.samplers` (origin "built-in"). Called once by the commands' register_builtins().
void register_builtin_samplers(Registries& registries);

/// The largest batch size build_sampler accepts (2^31 rows): it keeps a DDP step's items,
/// batch size x world size, far from overflowing.
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 31;
/// The most items (indices or batches) an epoch may have (2^62): a padded DDP epoch stays in range.
inline constexpr int64_t kMaxEpochItems = int64_t{1} << 62;

/// The sampler of a config's `sampler:` slot, built through the registry (built-in or plugin).
/// `sampler: null` (nullopt) means `random` with context.default_batch_size (bs_train) and
/// drop_last true. Errors: ConfigError for an unknown name or bad args (with file:line:col),
/// DataError when the data cannot satisfy the sampler (an argument that does not fit it placed
/// at the argument, or a sampler that gives no batch per epoch or batches above kMaxBatchSize),
/// PluginError when a plugin's sampler fails with anything but an oml error (naming the plugin)
/// or returns no sampler.
std::shared_ptr<data::Sampler> build_sampler(const std::optional<config::ComponentSpec>& spec,
                                             const data::SamplerContext& context);
/// The same from the slot's parse (ParsedComponents::sampler), built without reading its args
/// again: nullopt is `sampler: null`, as above.
std::shared_ptr<data::Sampler> build_sampler(
    const std::optional<ParsedComponent<std::shared_ptr<data::Sampler>>>& parsed,
    const data::SamplerContext& context);

}  // namespace oml::samplers
