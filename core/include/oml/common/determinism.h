#pragma once
// Lightning's `Trainer(deterministic=True | "warn")` for a process: ATen's deterministic
// algorithms, deterministic cuDNN without its benchmark search, and cuBLAS's fixed workspace
// (docs/training.md#deterministic-training). Set before any CUDA work: cuBLAS reads
// CUBLAS_WORKSPACE_CONFIG when it creates its first handle.
//
//   oml::use_deterministic_algorithms(/*warn_only=*/false);
//   log::info(oml::describe(oml::determinism_state()));

#include <string>

namespace oml {

/// The cuBLAS workspace setting NVIDIA documents as reproducible (Lightning sets the same).
inline constexpr const char* kDeterministicCublasWorkspace = ":4096:8";

/// Makes ATen use deterministic algorithms (an operation without one raises an error, or with
/// `warn_only` a warning, when it runs), makes cuDNN deterministic with its benchmark off, and
/// sets CUBLAS_WORKSPACE_CONFIG to kDeterministicCublasWorkspace unless the environment already
/// has a value (the user's own, e.g. ":16:8", which NVIDIA documents as reproducible too).
void use_deterministic_algorithms(bool warn_only);

/// What is in force in this process, read back from ATen's global context and the environment.
struct DeterminismState {
  bool algorithms = false;  ///< at::globalContext().deterministicAlgorithms()
  bool warn_only = false;   ///< ... deterministicAlgorithmsWarnOnly()
  bool cudnn_deterministic = false;
  bool cudnn_benchmark = false;
  std::string cublas_workspace_config;  ///< "" when unset
};
DeterminismState determinism_state();

/// "deterministic algorithms on (errors), cuDNN deterministic, cuDNN benchmark off,
/// CUBLAS_WORKSPACE_CONFIG=:4096:8" — for the run's log.
std::string describe(const DeterminismState& state);

}  // namespace oml
