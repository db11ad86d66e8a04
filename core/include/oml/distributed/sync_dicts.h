#pragma once
// Merging per-rank results on every rank (docs/ddp.md#validation-under-ddp): sync_dicts and the
// validation Accumulator.
//
//   SyncDict mine{{"embeddings", emb}, {"indices", idx}, {"paths", std::vector<std::string>{...}}};
//   SyncDict all = sync_dicts(group, mine);   // every rank gets rank 0's rows, then rank 1's, ...
//
// Tensors travel as tensors (one broadcast per rank straight into the result; no padding and
// no serialisation of float data), lists of ints, floats and strings as packed bytes. Keys, value kinds,
// dtypes and trailing shapes must agree on every rank; otherwise every rank throws the same DistributedError,
// naming the key and the ranks that differ.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace oml::distributed {

class ProcessGroup;

/// A tensor (concatenated along dim 0) or a list (concatenated).
using SyncValue =
    std::variant<at::Tensor, std::vector<int64_t>, std::vector<double>, std::vector<std::string>>;
using SyncDict = std::map<std::string, SyncValue>;

/// "tensor", "ints", "floats" or "strings".
const char* kind_name(const SyncValue& value);
/// Number of rows: first dimension of a tensor, length of a list.
int64_t row_count(const SyncValue& value);

/// Every rank's dict merged in rank order, on every rank. With a group of size 1 (or none),
/// returns `local` unchanged. Throws DistributedError on mismatched keys, kinds, dtypes or
/// trailing shapes (on every rank, naming the key and ranks) and when a collective fails.
SyncDict sync_dicts(ProcessGroup& group, const SyncDict& local);

/// Collects per-batch results on each rank, then merges them across ranks:
///
///   Accumulator acc("indices");
///   for (batch...) acc.update({{"embeddings", e}, {"indices", batch.indices}, {"labels", l}});
///   SyncDict all = acc.sync(group);   // rows from all ranks, each dataset index once, sorted
///
/// Padding of the distributed sampler repeats some dataset indices; sync() keeps the first
/// occurrence (in rank order) of each index and sorts all values by index. Every value must
/// have one row per index.
class Accumulator {
 public:
  explicit Accumulator(std::string index_key = "indices");

  /// Appends one batch. The first batch fixes the keys and kinds; later batches must match
  /// (InternalError otherwise: a pipeline bug, not user input).
  void update(const SyncDict& batch);
  /// Rows collected on this rank so far.
  int64_t size() const;
  bool empty() const { return size() == 0; }
  void reset();

  /// This rank's rows as one dict (lists concatenated, tensors cat'ed along dim 0).
  SyncDict local() const;
  /// Merged over ranks (sync_dicts), deduplicated by index (first occurrence kept) and sorted
  /// by index. Collective: every rank must call it.
  SyncDict sync(ProcessGroup& group) const;

 private:
  std::string index_key_;
  std::map<std::string, std::vector<SyncValue>> parts_;
  int64_t rows_ = 0;
};

/// Keeps the first occurrence of each value of `dict[index_key]` and sorts every value by it.
/// The index must be an integer tensor of one dimension or a list of ints.
SyncDict dedupe_and_sort_by_index(const SyncDict& dict, const std::string& index_key);

}  // namespace oml::distributed
