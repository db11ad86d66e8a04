#include "oml/distributed/sync_dicts.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "oml/common/error.h"
#include "oml/common/failpoint.h"
#include "oml/common/strings.h"
#include "oml/distributed/process_group.h"

namespace oml::distributed {

namespace {

// What must agree between ranks for one value: its kind, and for tensors dtype and trailing
// shape ("tensor float32[*,512]").
std::string signature(const SyncValue& value) {
  std::string text = kind_name(value);
  if (const auto* t = std::get_if<at::Tensor>(&value)) {
    OML_CHECK(t->defined() && t->dim() >= 1, InternalError,
              "sync_dicts: tensors need at least one dimension");
    text += std::string(" ") + c10::toString(t->scalar_type()) + "[*";
    for (int64_t d = 1; d < t->dim(); ++d) {
      text += ',';  // appended apart: GCC 12 warns falsely on "literal" + std::string
      text += std::to_string(t->size(d));
    }
    text += "]";
  }
  return text;
}

// One line per key: "key\tsignature". Keys cannot hold a newline or a tab.
std::string schema_of(const SyncDict& dict) {
  std::string schema;
  for (const auto& [key, value] : dict) {
    OML_CHECK(key.find_first_of("\t\n") == std::string::npos, InternalError, "sync_dicts: key '", key,
              "' contains a tab or newline");
    schema += key + "\t" + signature(value) + "\n";
  }
  return schema;
}

std::map<std::string, std::string> parse_schema(const std::string& schema) {
  std::map<std::string, std::string> result;
  for (const auto& line : split(schema, '\n')) {
    if (line.empty()) continue;
    const auto tab = line.find('\t');
    result[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return result;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(names);
}

// Same message on every rank: all ranks hold all schemas.
[[noreturn]] void report_mismatch(const std::vector<std::string>& schemas) {
  std::vector<std::map<std::string, std::string>> parsed;
  std::set<std::string> keys;
  for (const auto& s : schemas) {
    parsed.push_back(parse_schema(s));
    for (const auto& [key, sig] : parsed.back()) keys.insert(key);
  }
  std::vector<std::string> problems;
  for (const auto& key : keys) {
    std::map<std::string, std::vector<int>> by_signature;  // "missing" or the signature
    for (int r = 0; r < static_cast<int>(parsed.size()); ++r) {
      const auto it = parsed[r].find(key);
      by_signature[it == parsed[r].end() ? "missing" : it->second].push_back(r);
    }
    if (by_signature.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [sig, ranks] : by_signature) parts.push_back(sig + " on " + rank_list(ranks));
    problems.push_back("key '" + key + "': " + join(parts, "; "));
  }
  if (problems.empty()) problems.push_back("the key lists differ");
  DistributedError error("sync_dicts: ranks passed different dicts: " + problems.front());
  for (std::size_t i = 1; i < problems.size(); ++i) error.add_context(problems[i]);
  throw error;
}

template <class T>
at::Tensor vector_tensor(const std::vector<T>& values, torch::Dtype dtype) {
  at::Tensor t = torch::empty({static_cast<int64_t>(values.size())}, dtype);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> gather_numbers(ProcessGroup& group, const std::vector<T>& values, torch::Dtype dtype) {
  std::vector<T> merged;
  for (const auto& part : group.all_gather(vector_tensor(values, dtype))) {
    const at::Tensor c = part.contiguous();
    const T* data = c.numel() ? c.template data_ptr<T>() : nullptr;
    merged.insert(merged.end(), data, data + c.numel());
  }
  return merged;
}

// Strings as one byte blob per rank: [u64 length][bytes] per string.
std::string pack(const std::vector<std::string>& strings) {
  std::string blob;
  for (const auto& s : strings) {
    const uint64_t n = s.size();
    blob.append(reinterpret_cast<const char*>(&n), sizeof n);
    blob += s;
  }
  return blob;
}

void unpack(const std::string& blob, std::vector<std::string>& out) {
  std::size_t pos = 0;
  while (pos < blob.size()) {
    uint64_t n = 0;
    OML_ASSERT(pos + sizeof n <= blob.size(), "truncated string list");
    std::memcpy(&n, blob.data() + pos, sizeof n);
    pos += sizeof n;
    OML_ASSERT(pos + n <= blob.size(), "truncated string list");
    out.emplace_back(blob.substr(pos, n));
    pos += n;
  }
}

SyncValue gather_value(ProcessGroup& group, const SyncValue& value) {
  if (const auto* t = std::get_if<at::Tensor>(&value)) {
    return group.all_gather_concat(*t);
  }
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&value))
    return gather_numbers(group, *ints, torch::kLong);
  if (const auto* floats = std::get_if<std::vector<double>>(&value)) {
    return gather_numbers(group, *floats, torch::kDouble);
  }
  std::vector<std::string> merged;
  for (const auto& blob : group.all_gather_bytes(pack(std::get<std::vector<std::string>>(value)))) {
    unpack(blob, merged);
  }
  return merged;
}

template <class T>
std::vector<T> pick(const std::vector<T>& values, const std::vector<int64_t>& rows) {
  std::vector<T> picked;
  picked.reserve(rows.size());
  for (int64_t r : rows) picked.push_back(values[r]);
  return picked;
}

SyncValue concatenate(const std::vector<SyncValue>& parts) {
  if (std::holds_alternative<at::Tensor>(parts.front())) {
    std::vector<at::Tensor> tensors;
    for (const auto& p : parts) tensors.push_back(std::get<at::Tensor>(p));
    return tensors.size() == 1 ? tensors.front() : torch::cat(tensors, 0);
  }
  return std::visit(
      [&](const auto& first) -> SyncValue {
        using T = std::decay_t<decltype(first)>;
        if constexpr (std::is_same_v<T, at::Tensor>) {
          return first;
        } else {
          T all;
          for (const auto& p : parts) {
            const auto& v = std::get<T>(p);
            all.insert(all.end(), v.begin(), v.end());
          }
          return all;
        }
      },
      parts.front());
}

}  // namespace

const char* kind_name(const SyncValue& value) {
  switch (value.index()) {
    case 0:
      return "tensor";
    case 1:
      return "ints";
    case 2:
      return "floats";
    default:
      return "strings";
  }
}

int64_t row_count(const SyncValue& value) {
  if (const auto* t = std::get_if<at::Tensor>(&value)) return t->defined() && t->dim() > 0 ? t->size(0) : 0;
  return std::visit(
      [](const auto& v) -> int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, at::Tensor>) {
          return 0;
        } else {
          return static_cast<int64_t>(v.size());
        }
      },
      value);
}

SyncDict sync_dicts(ProcessGroup& group, const SyncDict& local) {
  if (group.size() == 1) return local;
  failpoint("sync_dicts");  // a fault injected here lands in the all_gather that follows
  const std::string schema = schema_of(local);
  const auto schemas = group.all_gather_bytes(schema);
  if (std::any_of(schemas.begin(), schemas.end(), [&](const std::string& s) { return s != schema; })) {
    report_mismatch(schemas);
  }
  SyncDict merged;
  for (const auto& [key, value] : local) merged.emplace(key, gather_value(group, value));
  return merged;
}

// ---- Accumulator --------------------------------------------------------------------------
Accumulator::Accumulator(std::string index_key) : index_key_(std::move(index_key)) {}

void Accumulator::update(const SyncDict& batch) {
  const auto index = batch.find(index_key_);
  OML_CHECK(index != batch.end(), InternalError, "Accumulator: batch has no index key '", index_key_, "'");
  const int64_t rows = row_count(index->second);
  if (!parts_.empty()) {
    OML_CHECK(batch.size() == parts_.size(), InternalError, "Accumulator: batch has ", batch.size(),
              " keys, earlier batches had ", parts_.size());
  }
  for (const auto& [key, value] : batch) {
    OML_CHECK(row_count(value) == rows, InternalError, "Accumulator: key '", key, "' has ", row_count(value),
              " rows, the index '", index_key_, "' has ", rows);
    auto& list = parts_[key];
    OML_CHECK(list.empty() || signature(list.front()) == signature(value), InternalError,
              "Accumulator: key '", key, "' changed from ", signature(list.front()), " to ",
              signature(value));
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      list.emplace_back(t->detach());
    } else {
      list.push_back(value);
    }
  }
  OML_CHECK(parts_.size() == batch.size(), InternalError, "Accumulator: batches have different keys");
  rows_ += rows;
}

int64_t Accumulator::size() const { return rows_; }

void Accumulator::reset() {
  parts_.clear();
  rows_ = 0;
}

SyncDict Accumulator::local() const {
  SyncDict dict;
  for (const auto& [key, parts] : parts_) dict.emplace(key, concatenate(parts));
  return dict;
}

SyncDict Accumulator::sync(ProcessGroup& group) const {
  return dedupe_and_sort_by_index(sync_dicts(group, local()), index_key_);
}

SyncDict dedupe_and_sort_by_index(const SyncDict& dict, const std::string& index_key) {
  const auto found = dict.find(index_key);
  OML_CHECK(found != dict.end(), InternalError, "dedupe: no index key '", index_key, "'");
  std::vector<int64_t> index;
  if (const auto* t = std::get_if<at::Tensor>(&found->second)) {
    OML_CHECK(t->dim() == 1 && !t->is_floating_point(), InternalError, "dedupe: index '", index_key,
              "' must be a 1-d integer tensor");
    const at::Tensor i64 = t->to(torch::kLong).contiguous();
    index.assign(i64.data_ptr<int64_t>(), i64.data_ptr<int64_t>() + i64.numel());
  } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&found->second)) {
    index = *ints;
  } else {
    throw InternalError("dedupe: index '" + index_key + "' must hold integers, got " +
                        kind_name(found->second));
  }
  std::vector<int64_t> order(index.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable: among equal indices the earlier row (lower rank) comes first and is kept.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return index[a] < index[b]; });
  std::vector<int64_t> keep;
  keep.reserve(order.size());
  for (int64_t row : order) {
    if (keep.empty() || index[keep.back()] != index[row]) keep.push_back(row);
  }
  const at::Tensor keep_tensor = vector_tensor(keep, torch::kLong);
  SyncDict result;
  for (const auto& [key, value] : dict) {
    OML_CHECK(row_count(value) == static_cast<int64_t>(index.size()), InternalError, "dedupe: key '", key,
              "' has ", row_count(value), " rows, the index has ", index.size());
    std::visit(
        [&, &key = key](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, at::Tensor>) {
            result.emplace(key, v.index_select(0, keep_tensor.to(v.device())));
          } else {
            result.emplace(key, pick(v, keep));
          }
        },
        value);
  }
  return result;
}

}  // namespace oml::distributed
