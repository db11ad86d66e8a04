#pragma once
// Process-level settings every command applies at start-up: the math library check and the
// number of intra-op threads.

#include <string>

namespace oml {

/// Which BLAS library LibTorch's matrix multiplies resolve to, e.g. "OpenBLAS
/// (/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)". Starts with "reference" for
/// the slow reference BLAS and "unknown" when it cannot be told.
std::string blas_backend();

/// True when LibTorch would run on the reference BLAS (~25x slower than OpenBLAS here).
bool using_reference_blas();

/// Logs a warning (once) when using_reference_blas(); called by every command at start-up.
void warn_if_reference_blas();

/// Sets LibTorch's intra-op threads: `requested` when > 0, else hardware cores / `local_ranks`
/// (at least 1). Returns the number set.
int configure_threads(int requested, int local_ranks = 1);

}  // namespace oml
