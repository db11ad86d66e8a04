#pragma once
// Shared between the multi-process worker (oml_ddp_worker) and the tests that drive it: the
// per-rank inputs of each scenario and a plain-text dump of a SyncDict, so that a test can
// compare what every rank received with a reference it builds itself.

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <string>

#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/sync_dicts.h"

namespace oml::test::ddp {

/// Rank r contributes r + 2 rows: uneven first dimensions on purpose.
inline int64_t rows_of_rank(int rank) { return rank + 2; }

/// The dict rank r passes to sync_dicts in the "sync" scenario.
inline distributed::SyncDict sync_input(int rank) {
  const int64_t n = rows_of_rank(rank);
  distributed::SyncDict dict;
  dict["embeddings"] =
      torch::arange(n * 3, torch::kFloat).reshape({n, 3}) + 1000.0f * static_cast<float>(rank);
  dict["indices"] = torch::arange(n, torch::kLong) + 10 * rank;
  std::vector<int64_t> labels;
  std::vector<double> scores;
  std::vector<std::string> paths;
  for (int64_t i = 0; i < n; ++i) {
    labels.push_back(rank * 7 + i);
    scores.push_back(rank + 0.25 * static_cast<double>(i));
    paths.push_back("rank" + std::to_string(rank) + "/item " + std::to_string(i) + (i % 2 ? "" : "/ü"));
  }
  dict["labels"] = labels;
  dict["scores"] = scores;
  dict["paths"] = paths;
  dict["empty_on_rank0"] =
      rank == 0 ? torch::zeros({0, 2}, torch::kDouble) : torch::ones({1, 2}, torch::kDouble);
  return dict;
}

/// The dict rank r passes to sync_dicts in the "sync_large" scenario: uneven blocks of tens
/// of megabytes (the gather's large-buffer path), values exact in float32.
inline distributed::SyncDict sync_large_input(int rank) {
  const int64_t n = 40000 + 12345 * rank, dim = 64;
  distributed::SyncDict dict;
  dict["embeddings"] =
      torch::arange(n * dim, torch::kFloat).reshape({n, dim}) + 1.0e6f * static_cast<float>(rank);
  dict["indices"] = torch::arange(n, torch::kLong) + 1000000 * rank;
  dict["empty_on_rank0"] = torch::full({rank == 0 ? 0 : n, 3}, static_cast<double>(rank), torch::kDouble);
  return dict;
}

/// Deterministic text of a dict: key, kind, and every value at full precision.
inline std::string dump(const distributed::SyncDict& dict) {
  std::ostringstream out;
  out << std::setprecision(17);
  for (const auto& [key, value] : dict) {
    out << key << " " << distributed::kind_name(value) << " " << distributed::row_count(value) << ":";
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      out << " " << c10::toString(t->scalar_type()) << t->sizes();
      const at::Tensor flat = t->to(torch::kDouble).contiguous().reshape(-1);
      for (int64_t i = 0; i < flat.numel(); ++i) out << " " << flat[i].item<double>();
    } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
      for (auto v : *ints) out << " " << v;
    } else if (const auto* floats = std::get_if<std::vector<double>>(&value)) {
      for (auto v : *floats) out << " " << v;
    } else {
      for (const auto& s : std::get<std::vector<std::string>>(value)) out << " [" << s << "]";
    }
    out << "\n";
  }
  return out.str();
}

/// The model of the gradient scenarios: no batch-dependent layers, one layer never used
/// (its gradient must stay undefined) and an extra trainable tensor outside the module
/// (like a loss's class weights).
struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 8));
    unused = register_module("unused", torch::nn::Linear(3, 3));
    scale = register_buffer("scale", torch::ones({1}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))) * scale; }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
  torch::Tensor scale;
};
TORCH_MODULE(TinyNet);

/// The global batch of step `step`: inputs [batch, 4] and targets in [0, 5).
inline std::pair<torch::Tensor, torch::Tensor> global_batch(int64_t step, int64_t batch) {
  auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(1234 + step));
  torch::Tensor x = at::normal(0.0, 1.0, {batch, 4}, gen);
  torch::Tensor y = at::randint(0, 5, {batch}, gen, torch::kLong);
  return {x, y};
}

/// Rank r's tensor of the "compressed_mean" scenario: float32 values of both signs over ten
/// binary orders of magnitude, with some exact zeros; `case_index` picks one of several such
/// tensors. Their sizes divide by neither 2 nor 3 (padded blocks), and the last one spans
/// several of all_reduce_mean's pieces (the last one short).
inline torch::Tensor compressed_input(int rank, int case_index) {
  const int64_t numel = case_index == 2 ? 2 * distributed::kCompressedPieceElements + 1001 : 1001;
  auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(7000 + 100 * case_index + rank));
  const torch::Tensor magnitude = at::exp2(at::randint(-8, 3, {numel}, gen, torch::kFloat));
  torch::Tensor values = at::normal(0.0, 1.0, {numel}, gen) * magnitude;
  values.narrow(0, 0, 7).zero_();
  return values;
}
inline constexpr int kCompressedCases = 3;

/// What rank r passes to values_from_rank0 in round `round` of the "from_rank0" scenario. Rank
/// 0's values have no short decimal form, or none at all (NaN, infinity, a subnormal, -0.0), and
/// names of any bytes (empty, UTF-8, a newline); round 1 is rank 0 without values. Other ranks
/// pass values of their own, which must not arrive anywhere.
inline std::map<std::string, double> from_rank0_input(int rank, int round) {
  if (rank != 0) return {{"rank" + std::to_string(rank), static_cast<double>(rank)}, {"OVERALL/cmc/1", -1.0}};
  if (round == 1) return {};
  return {{"OVERALL/cmc/1", 0.1 + 0.2},
          {"OVERALL/map/5", std::numeric_limits<double>::quiet_NaN()},
          {"", -std::numeric_limits<double>::infinity()},
          {"shirts/précision\nx", std::numeric_limits<double>::denorm_min()},
          {"a\nb", -0.0}};
}

/// What rank r decides in round `round` of the "from_rank0" scenario: rank 0 alternates.
inline bool from_rank0_decision(int rank, int round) { return rank == 0 ? round % 2 == 0 : round % 2 == 1; }

/// Named values as text, each value by its bits (so NaN, -0.0 and the last bit compare exactly).
inline std::string dump_bits(const std::map<std::string, double>& values) {
  std::ostringstream out;
  for (const auto& [name, value] : values) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    out << std::quoted(name) << " " << std::hex << bits << std::dec << "\n";
  }
  return out.str();
}

}  // namespace oml::test::ddp
