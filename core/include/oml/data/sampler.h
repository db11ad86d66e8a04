#pragma once
// The sampler interface: what decides which dataset rows go into which batch, epoch by epoch.
//
// Built-in samplers live in plugins/samplers (sequential, random, balance, category_balance,
// distinct_category_balance); third-party samplers are plugins registered under their own names
// (docs/plugins.md). Pipelines build whichever sampler the config names from
// `registries().samplers` and, when the world has more than one rank, wrap it in the DDP plugin's
// DDPSamplerWrapper. They never special-case a sampler, so every sampler must honour the
// contract below.
//
// ## Contract (what an implementation must provide and guarantee)
//
// Kinds. A sampler is either
//   - an *index sampler* (derive from IndexSampler): an epoch is an ordered list of dataset
//     indices; the loader cuts it into batches of batch_size(), dropping a short last batch when
//     drop_last() (torch's BatchSampler semantics). Under DDP the indices are split between ranks
//     first and every rank then batches its share.
//   - a *batch sampler* (derive from BatchSampler): an epoch is an ordered list of batches, each a
//     list of dataset indices. Under DDP whole batches are split between ranks.
// Sampler's constructor is private to these two classes, so kind() always tells the truth.
//
// Indices. Every index is a row of the sampled split in dataframe order: 0 <= index <
// SamplerContext::labels.size(). An index may appear more than once in an epoch or a batch
// (e.g. a label with fewer than K items).
//
// Determinism. The epoch is a pure function of (SamplerContext::seed, epoch, labels[,
// categories]): calling indices(e) / batches(e) twice, on any rank, in any process, before or
// after a resume, returns the same list. Implementations draw from their own generator
// (SamplerRng in "oml/data/sampler_rng.h", seeded from (seed, epoch)) and never from global RNG
// state (std::rand, torch's default generator, a static engine). Different epochs should
// differ. Epoch methods are const and may be called concurrently.
//
// Size. size() is the number of items per epoch (indices for index samplers, batches for batch
// samplers) and is the same for every epoch. indices(e).size() == size(), batches(e).size() ==
// size().
//
// Validation. Constructors check their arguments against the data and throw: ConfigError for
// a bad argument (naming the sampler, the argument and the offending value), DataError when the
// data cannot satisfy the sampler (e.g. a label with one item). Never a crash, never a silently
// smaller epoch.
//
// Position / resume. Because an epoch is a pure function of its number, a position in it is
// just a count: the Trainer records the items of the epoch's global order that all ranks
// consumed, and on resume the DDP plugin's DDPSamplerWrapper::batches_from deals out exactly
// what was not consumed yet, to any number of ranks. Samplers therefore need no state of their
// own to save.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace oml::data {

/// A batch: dataset indices (rows of the sampled split), in the order they are loaded.
using Batch = std::vector<int64_t>;

/// What a sampler's build receives besides its parsed args.
struct SamplerContext {
  /// Label of every row of the sampled split, in dataframe order, remapped to 0..L-1.
  std::vector<int64_t> labels;
  /// Category of every row (same length as labels), or empty when the dataframe has no
  /// category column.
  std::vector<std::string> categories;
  /// Original label value of each remapped label (label_values[l] is the dataframe's value of
  /// label l), for messages; may be empty (messages then print the remapped label).
  std::vector<int64_t> label_values;
  /// The run's seed; with the epoch number it determines every epoch.
  int64_t seed = 0;
  /// Batch size an index sampler uses when its args give none (the config's `bs_train`);
  /// 0 means the `batch_size` arg is required.
  int64_t default_batch_size = 0;
  /// Names the sampled data in messages: "the train split of /data/df.csv".
  std::string source = "the dataset";

  /// The dataframe's value of remapped label `label` (the label itself without label_values).
  int64_t label_value(int64_t label) const;
};

enum class SamplerKind { index, batch };

/// Base of every sampler. Derive from IndexSampler or BatchSampler, never from this class.
class Sampler {
 public:
  virtual ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  virtual SamplerKind kind() const = 0;
  /// Registered name ("balance"), for messages and listings.
  virtual std::string name() const = 0;
  /// Items per epoch: indices (index samplers) or batches (batch samplers).
  virtual int64_t size() const = 0;
  /// Index samplers: the size of the batches the loader forms. Batch samplers: the size of
  /// every batch they produce (P * K for balance), for throughput figures and messages.
  virtual int64_t batch_size() const = 0;
  /// Index samplers only: drop a last batch shorter than batch_size(). Always false for batch
  /// samplers.
  virtual bool drop_last() const = 0;

 private:
  Sampler() = default;
  friend class IndexSampler;
  friend class BatchSampler;
};

/// A sampler whose epoch is a list of indices (see the contract above).
class IndexSampler : public Sampler {
 public:
  IndexSampler() = default;
  ~IndexSampler() override;
  SamplerKind kind() const final { return SamplerKind::index; }
  /// The epoch's indices; size() of them. A pure function of (seed, epoch, data).
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

/// A sampler whose epoch is a list of batches (see the contract above).
class BatchSampler : public Sampler {
 public:
  BatchSampler() = default;
  ~BatchSampler() override;
  SamplerKind kind() const final { return SamplerKind::batch; }
  bool drop_last() const final { return false; }
  /// The epoch's batches; size() of them. A pure function of (seed, epoch, data).
  virtual std::vector<Batch> batches(int64_t epoch) const = 0;
};

/// Cuts indices into batches of `batch_size` (the last one shorter unless `drop_last`), like
/// torch's BatchSampler.
std::vector<Batch> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last);

/// Number of batches `make_batches` forms from `n` indices: ceil(n / bs), or floor with drop_last.
int64_t batch_count(int64_t n, int64_t batch_size, bool drop_last);

/// Any sampler's epoch as the batches the loader runs: a batch sampler's batches, or an index
/// sampler's indices cut by make_batches(batch_size(), drop_last()). PluginError naming the
/// sampler and the epoch when it draws other than size() items, or when drawing throws anything
/// but an oml error.
std::vector<Batch> epoch_batches(const Sampler& sampler, int64_t epoch);

/// An index sampler's epoch, checked as epoch_batches checks it.
std::vector<int64_t> epoch_indices(const IndexSampler& sampler, int64_t epoch);

/// PluginError naming the sampler, the batch and the epoch when a batch is empty or holds an
/// index outside [0, rows): the contract's "Indices", enforced where the rows are known.
void check_batches(const Sampler& sampler, const std::vector<Batch>& batches, int64_t epoch, int64_t rows);

/// Steps (batches) per epoch of any sampler, without drawing an epoch.
int64_t batches_per_epoch(const Sampler& sampler);

}  // namespace oml::data
