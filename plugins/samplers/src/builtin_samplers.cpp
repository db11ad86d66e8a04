#include "oml/samplers/builtin_samplers.h"

#include "oml/config/args_reader.h"
#include "oml/registry/registries.h"
#include "oml/samplers/balance_sampler.h"
#include "oml/samplers/category_balance_sampler.h"
#include "oml/samplers/distinct_category_balance_sampler.h"
#include "oml/samplers/index_samplers.h"

namespace oml::samplers {

namespace {

using SamplerPtr = std::shared_ptr<data::Sampler>;

// sequential and random: `sampler` is the name.
IndexSamplerOptions parse_index_options(config::ArgsReader& reader, const std::string& sampler) {
  IndexSamplerOptions options;
  reader.optional("batch_size", options.batch_size).optional("drop_last", options.drop_last);
  reader.check([&] { check_options(options, sampler); });
  return options;
}

void read_balance(config::ArgsReader& reader, BalanceOptions& options) {
  reader.required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .optional("epoch_size", options.epoch_size);
}

void read_category_balance(config::ArgsReader& reader, CategoryBalanceOptions& options) {
  reader.required("n_categories", options.n_categories)
      .required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .optional("resample_labels", options.resample_labels)
      .optional("weight_categories", options.weight_categories);
}

void read_distinct_category_balance(config::ArgsReader& reader, DistinctCategoryBalanceOptions& options) {
  reader.required("n_categories", options.n_categories)
      .required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .required("epoch_size", options.epoch_size);
}

// The build of every built-in sampler: its constructor from the options and the data.
template <class Sampler, class Options>
SamplerPtr build(const Options& options, const data::SamplerContext& context) {
  return std::make_shared<Sampler>(context, options);
}

std::string origin_of(const std::string& name) {
  for (const auto& info : registries().samplers.infos()) {
    if (info.name == name) return info.origin;
  }
  return "unknown origin";
}

}  // namespace

void register_builtin_samplers(Registries& registries) {
  auto& r = registries.samplers;
  r.add(
      "sequential", [](config::ArgsReader& reader) { return parse_index_options(reader, "sequential"); },
      build<SequentialSampler, IndexSamplerOptions>,
      "rows in dataframe order; args: batch_size (default bs_train), drop_last=false");
  r.add(
      "random", [](config::ArgsReader& reader) { return parse_index_options(reader, "random"); },
      build<RandomSampler, IndexSamplerOptions>,
      "a fresh permutation of the rows each epoch; args: batch_size (default bs_train), drop_last=false");
  r.add("balance", config::checked_parse<BalanceOptions>(read_balance), build<BalanceSampler, BalanceOptions>,
        "P x K batches, no label repeated within an epoch; args: n_labels, n_instances, epoch_size=L//P");
  r.add("category_balance", config::checked_parse<CategoryBalanceOptions>(read_category_balance),
        build<CategoryBalanceSampler, CategoryBalanceOptions>,
        "C categories x P labels x K items per batch; args: n_categories, n_labels, n_instances, "
        "resample_labels=false, weight_categories=true");
  r.add("distinct_category_balance",
        config::checked_parse<DistinctCategoryBalanceOptions>(read_distinct_category_balance),
        build<DistinctCategoryBalanceSampler, DistinctCategoryBalanceOptions>,
        "C x P x K batches using every label of a category before repeating; args: n_categories, n_labels, "
        "n_instances, epoch_size");
}

std::shared_ptr<data::Sampler> build_sampler(const std::optional<config::ComponentSpec>& spec,
                                             const data::SamplerContext& context) {
  if (!spec) return build_sampler(std::optional<ParsedComponent<std::shared_ptr<data::Sampler>>>(), context);
  config::ErrorList errors;
  auto parsed = registries().samplers.parse(*spec, errors);
  errors.throw_if_any();
  return build_sampler(std::make_optional(std::move(parsed)), context);
}

std::shared_ptr<data::Sampler> build_sampler(
    const std::optional<ParsedComponent<std::shared_ptr<data::Sampler>>>& parsed,
    const data::SamplerContext& context) {
  if (!parsed) {
    IndexSamplerOptions options;
    options.drop_last = true;  // `sampler: null` is random with bs_train, drop_last (docs/samplers.md)
    return std::make_shared<RandomSampler>(context, options);
  }
  const std::string& name = parsed->spec.name;
  // The registry names the plugin when its build throws (Registry::build).
  const std::shared_ptr<data::Sampler> sampler = registries().samplers.build(*parsed, context);
  OML_CHECK(sampler != nullptr, PluginError, "sampler '", name, "' (", origin_of(name),
            ") returned no sampler");
  OML_CHECK(sampler->size() > 0 && sampler->batch_size() > 0, PluginError, "sampler '", name, "' (",
            origin_of(name), ") reports ", sampler->size(), " items per epoch and batch size ",
            sampler->batch_size(), "; both must be positive");
  // No epoch holds 2^62 items, nor a batch 2^31 rows; the bounds keep a padded DDP epoch and
  // batch_size x world (a DDP step's items) in range.
  OML_CHECK(sampler->size() <= kMaxEpochItems, PluginError, "sampler '", name, "' (", origin_of(name),
            ") reports ", sampler->size(), " items per epoch; at most ", kMaxEpochItems, " can be drawn");
  OML_CHECK(sampler->batch_size() <= kMaxBatchSize, DataError, "sampler '", name, "' (", origin_of(name),
            ") has batch size ", sampler->batch_size(), "; at most ", kMaxBatchSize, " rows fit in a batch");
  // An epoch of no step would end the run at once with exit 0, having trained nothing.
  OML_CHECK(data::batches_per_epoch(*sampler) > 0, DataError, "sampler '", name, "' (", origin_of(name),
            ") gives no batch per epoch: ", sampler->size(), " rows of ", context.source, " in batches of ",
            sampler->batch_size(),
            sampler->drop_last() ? " with drop_last (a short last batch is dropped)" : "",
            "; use a smaller batch size");
  return sampler;
}

}  // namespace oml::samplers
