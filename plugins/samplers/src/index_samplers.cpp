#include "oml/samplers/index_samplers.h"

#include <numeric>

#include "oml/data/sampler_rng.h"
#include "oml/samplers/label_groups.h"

namespace oml::samplers {

namespace {
struct Checked {
  int64_t n;
  int64_t batch_size;
};

Checked check_index_sampler(const std::string& sampler, const data::SamplerContext& context,
                            const IndexSamplerOptions& options) {
  check_options(options, sampler);
  const int64_t n = static_cast<int64_t>(context.labels.size());
  OML_CHECK(n > 0, DataError, "sampler '", sampler, "': ", context.source, " has no rows to sample");
  if (!options.batch_size && context.default_batch_size <= 0) {
    fail_fit(sampler, "batch_size", "batch_size is required (no default batch size, e.g. bs_train, is set)");
  }
  const int64_t batch_size = options.batch_size.value_or(context.default_batch_size);
  if (options.drop_last && n < batch_size) {
    fail_fit(sampler, "batch_size", "with drop_last, batch_size ", batch_size, " is larger than the ", n,
             " rows of ", context.source, ", so an epoch would have no batch");
  }
  return {n, batch_size};
}
}  // namespace

void check_options(const IndexSamplerOptions& options, const std::string& sampler) {
  if (options.batch_size && *options.batch_size < 1) {
    fail_argument(sampler, "batch_size", "batch_size must be >= 1, got ", *options.batch_size);
  }
}

SequentialSampler::SequentialSampler(const data::SamplerContext& context, const IndexSamplerOptions& options)
    : drop_last_(options.drop_last) {
  const Checked checked = check_index_sampler("sequential", context, options);
  n_ = checked.n;
  batch_size_ = checked.batch_size;
}

std::vector<int64_t> SequentialSampler::indices(int64_t /*epoch*/) const {
  std::vector<int64_t> out(n_);
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

RandomSampler::RandomSampler(const data::SamplerContext& context, const IndexSamplerOptions& options)
    : drop_last_(options.drop_last), seed_(context.seed) {
  const Checked checked = check_index_sampler("random", context, options);
  n_ = checked.n;
  batch_size_ = checked.batch_size;
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  std::vector<int64_t> out(n_);
  std::iota(out.begin(), out.end(), int64_t{0});
  data::SamplerRng rng(seed_, epoch);
  rng.shuffle(out);
  return out;
}

}  // namespace oml::samplers
