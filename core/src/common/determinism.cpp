#include "oml/common/determinism.h"

#include <ATen/Context.h>

#include <cstdlib>

namespace oml {

namespace {
constexpr const char* kCublasWorkspaceVariable = "CUBLAS_WORKSPACE_CONFIG";
}  // namespace

void use_deterministic_algorithms(bool warn_only) {
  auto& context = at::globalContext();
  context.setDeterministicAlgorithms(true, warn_only);
  context.setDeterministicCuDNN(true);
  // The benchmark search picks the fastest algorithm per shape by timing them, which can differ
  // between runs; PyTorch ignores cudnn.deterministic while it is on.
  context.setBenchmarkCuDNN(false);
  // overwrite = 0: a value the user exported stays.
  setenv(kCublasWorkspaceVariable, kDeterministicCublasWorkspace, /*overwrite=*/0);
}

DeterminismState determinism_state() {
  const auto& context = at::globalContext();
  DeterminismState state;
  state.algorithms = context.deterministicAlgorithms();
  state.warn_only = context.deterministicAlgorithmsWarnOnly();
  state.cudnn_deterministic = context.deterministicCuDNN();
  state.cudnn_benchmark = context.benchmarkCuDNN();
  const char* workspace = std::getenv(kCublasWorkspaceVariable);
  state.cublas_workspace_config = workspace ? workspace : "";
  return state;
}

std::string describe(const DeterminismState& state) {
  std::string out = "deterministic algorithms ";
  out += state.algorithms ? (state.warn_only ? "on (warnings)" : "on (errors)") : "off";
  out += state.cudnn_deterministic ? ", cuDNN deterministic" : ", cuDNN not deterministic";
  out += state.cudnn_benchmark ? ", cuDNN benchmark on" : ", cuDNN benchmark off";
  out += ", CUBLAS_WORKSPACE_CONFIG=" +
         (state.cublas_workspace_config.empty() ? std::string("(unset)") : state.cublas_workspace_config);
  return out;
}

}  // namespace oml
