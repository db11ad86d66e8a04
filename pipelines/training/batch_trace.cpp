#include "training/batch_trace.h"

#include <ATen/core/Tensor.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "oml/common/error.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

constexpr const char* kVariable = "OML_TRACE_BATCHES";

fs::path trace_file(const fs::path& dir, int64_t rank) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    throw UsageError(std::string(kVariable) + "=" + dir.string() + ": cannot create the directory (" +
                     error.message() + ")");
  }
  return dir / ("batches.rank" + std::to_string(rank) + ".jsonl");
}

}  // namespace

std::unique_ptr<BatchTrace> BatchTrace::from_environment(int64_t rank, int64_t world) {
  const char* dir = std::getenv(kVariable);
  if (dir == nullptr || *dir == '\0') return nullptr;
  try {
    return std::make_unique<BatchTrace>(dir, rank, world);
  } catch (const RuntimeError& e) {
    throw UsageError(std::string(kVariable) + "=" + dir + ": " + e.what());
  }
}

BatchTrace::BatchTrace(const fs::path& dir, int64_t rank, int64_t world)
    : rank_(rank), world_(world), out_(trace_file(dir, rank)) {}

void BatchTrace::record(int64_t epoch, int64_t step, const at::Tensor& indices) {
  const at::Tensor rows = indices.to(at::kLong).contiguous();
  const int64_t* data = rows.data_ptr<int64_t>();
  out_.write({{"epoch", epoch},
              {"step", step},
              {"rank", rank_},
              {"world_size", world_},
              {"indices", std::vector<int64_t>(data, data + rows.numel())}});
}

}  // namespace oml::pipelines
