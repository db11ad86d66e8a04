#pragma once
// `sequential` and `random`: plain index samplers (docs/samplers.md). The loader cuts their epoch into
// batches of `batch_size` (torch's BatchSampler semantics: ceil(n / bs) batches, or floor with
// drop_last).

#include <cstdint>
#include <optional>
#include <string>

#include "oml/data/sampler.h"

namespace oml::samplers {

/// Args of `sequential` and `random`:
///   sampler: {name: random, args: {batch_size: 64, drop_last: true}}
struct IndexSamplerOptions {
  /// Batch size; when absent, SamplerContext::default_batch_size (the config's bs_train).
  std::optional<int64_t> batch_size;
  bool drop_last = false;
};

/// config::ArgumentError unless batch_size >= 1 when given: what the args alone can tell (the
/// sampler's parse). What depends on the data is checked when the sampler is built.
void check_options(const IndexSamplerOptions& options, const std::string& sampler);

/// Rows 0..n-1 in dataframe order, every epoch.
class SequentialSampler final : public data::IndexSampler {
 public:
  /// Throws ConfigError for batch_size < 1 or a drop_last epoch without a single batch, and
  /// DataError for an empty split.
  SequentialSampler(const data::SamplerContext& context, const IndexSamplerOptions& options);

  std::string name() const override { return "sequential"; }
  int64_t size() const override { return n_; }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_last() const override { return drop_last_; }
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
  int64_t batch_size_;
  bool drop_last_;
};

/// A fresh permutation of rows 0..n-1 every epoch, drawn from (seed, epoch).
class RandomSampler final : public data::IndexSampler {
 public:
  /// Same checks as SequentialSampler.
  RandomSampler(const data::SamplerContext& context, const IndexSamplerOptions& options);

  std::string name() const override { return "random"; }
  int64_t size() const override { return n_; }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_last() const override { return drop_last_; }
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
  int64_t batch_size_;
  bool drop_last_;
  int64_t seed_;
};

}  // namespace oml::samplers
