#include "oml/samplers/builtin_samplers.h"

#include "oml/registry/registries.h"
#include "oml/samplers/balance_sampler.h"
#include "oml/samplers/category_balance_sampler.h"
#include "oml/samplers/distinct_category_balance_sampler.h"
#include "oml/samplers/index_samplers.h"

namespace oml::samplers {

namespace {

IndexSamplerOptions read_index_options(const config::Node& args, const std::string& name) {
  IndexSamplerOptions options;
  config::MapReader reader(args, "sampler '" + name + "' args");
  reader.optional("batch_size", options.batch_size).optional("drop_last", options.drop_last);
  reader.finish();
  return options;
}

std::shared_ptr<data::Sampler> make_sequential(const config::Node& args,
                                               const data::SamplerContext& context) {
  const auto options = read_index_options(args, "sequential");
  return std::make_shared<SequentialSampler>(context, options);
}

std::shared_ptr<data::Sampler> make_random(const config::Node& args, const data::SamplerContext& context) {
  const auto options = read_index_options(args, "random");
  return std::make_shared<RandomSampler>(context, options);
}

std::shared_ptr<data::Sampler> make_balance(const config::Node& args, const data::SamplerContext& context) {
  BalanceOptions options;
  config::MapReader reader(args, "sampler 'balance' args");
  reader.required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .optional("epoch_size", options.epoch_size);
  reader.finish();
  return std::make_shared<BalanceSampler>(context, options);
}

std::shared_ptr<data::Sampler> make_category_balance(const config::Node& args,
                                                     const data::SamplerContext& context) {
  CategoryBalanceOptions options;
  config::MapReader reader(args, "sampler 'category_balance' args");
  reader.required("n_categories", options.n_categories)
      .required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .optional("resample_labels", options.resample_labels)
      .optional("weight_categories", options.weight_categories);
  reader.finish();
  return std::make_shared<CategoryBalanceSampler>(context, options);
}

std::shared_ptr<data::Sampler> make_distinct_category_balance(const config::Node& args,
                                                              const data::SamplerContext& context) {
  DistinctCategoryBalanceOptions options;
  config::MapReader reader(args, "sampler 'distinct_category_balance' args");
  reader.required("n_categories", options.n_categories)
      .required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .required("epoch_size", options.epoch_size);
  reader.finish();
  return std::make_shared<DistinctCategoryBalanceSampler>(context, options);
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
  r.add("sequential", make_sequential,
        "rows in dataframe order; args: batch_size (default bs_train), drop_last=false");
  r.add("random", make_random,
        "a fresh permutation of the rows each epoch; args: batch_size (default bs_train), drop_last=false");
  r.add("balance", make_balance,
        "P x K batches, no label repeated within an epoch; args: n_labels, n_instances, epoch_size=L//P");
  r.add("category_balance", make_category_balance,
        "C categories x P labels x K items per batch; args: n_categories, n_labels, n_instances, "
        "resample_labels=false, weight_categories=true");
  r.add("distinct_category_balance", make_distinct_category_balance,
        "C x P x K batches using every label of a category before repeating; args: n_categories, n_labels, "
        "n_instances, epoch_size");
}

std::shared_ptr<data::Sampler> build_sampler(const std::optional<config::ComponentSpec>& spec,
                                             const data::SamplerContext& context) {
  if (!spec) {
    IndexSamplerOptions options;
    options.drop_last = true;  // `sampler: null` is random with bs_train, drop_last (docs/samplers.md)
    return std::make_shared<RandomSampler>(context, options);
  }
  const auto& samplers = registries().samplers;
  samplers.require(*spec);
  // The registry names the plugin when a factory throws (Registry::create).
  const std::shared_ptr<data::Sampler> sampler = samplers.create(*spec, context);
  OML_CHECK(sampler != nullptr, PluginError, "sampler '", spec->name, "' (", origin_of(spec->name),
            ") returned no sampler");
  OML_CHECK(sampler->size() > 0 && sampler->batch_size() > 0, PluginError, "sampler '", spec->name, "' (",
            origin_of(spec->name), ") reports ", sampler->size(), " items per epoch and batch size ",
            sampler->batch_size(), "; both must be positive");
  return sampler;
}

}  // namespace oml::samplers
