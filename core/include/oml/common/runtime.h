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

/// What a command's freed memory is kept for (tune_allocator).
enum class AllocatorUse {
  general,   ///< blocks up to 32 MB reused from the heap, larger ones mapped and unmapped each time
  training,  ///< every block from the heap: a training step frees and asks again for the same sizes
};

/// Fixes glibc's malloc thresholds (LibTorch's CPU allocator is plain malloc): freed blocks up to
/// 32 MB (the most glibc allows) stay in the heap, which is trimmed only when 64 MB at its top
/// are free. With glibc's adaptive defaults a training step's activations went back to the kernel
/// after every step and were faulted in again on the next: resnet18 at 32 px trained at ~300
/// instead of ~400 images/s until an unrelated large free (the first checkpoint) raised the
/// thresholds, and the adaptive threshold stops at 32 MB after the first steps. For `training`,
/// larger blocks come from the heap too (M_MMAP_MAX 0), so that resnet50's fp32 step at 224 px
/// (100 MB activations) stops faulting them in each step (1.2x; docs/benchmarks.md); the process
/// then keeps its peak memory. Leaves things alone when the user set MALLOC_MMAP_THRESHOLD_ /
/// MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_MAX_ or glibc.malloc tunables in GLIBC_TUNABLES.
/// Called by every command at start-up. Returns whether it changed the settings.
bool tune_allocator(AllocatorUse use = AllocatorUse::general);

/// LibTorch's c10d and Gloo log through glog, which on its own prints "WARNING: Logging before
/// InitGoogleLogging()" and its warnings (a port in use, an unreachable store) ahead of the
/// command's one-line error that says the same. Initialises glog to log to stderr only (never to
/// files in /tmp) and to show its messages only when `verbose` (warnings and errors then).
/// Called by every command at start-up.
void configure_library_logging(const char* program, bool verbose);

/// While alive, BLAS calls run on their calling thread alone, for code that multiplies on several
/// threads at once (the BLAS would otherwise start its own threads inside each call, threads x
/// threads on the cores). OpenBLAS (Debian's LibTorch): its thread count is process-wide, set to
/// 1 and restored by the destructor, so hold one guard around the parallel region. MKL (the
/// wheel's LibTorch): its setting is per thread, so also hold one in each thread that
/// multiplies (a nested guard changes nothing for OpenBLAS).
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_ = 0;  // OpenBLAS's count; 0: nothing to restore
  bool mkl_set_ = false;
  int previous_mkl_ = 0;  // MKL's previous per-thread count (0: the global one)
};

/// Sets LibTorch's intra-op threads: `requested` when > 0, else OMP_NUM_THREADS where it is a
/// positive integer (PyTorch's default; torchrun and test runners set it), else hardware cores /
/// `local_ranks` (at least 1). Returns the number set.
int configure_threads(int requested, int local_ranks = 1);

}  // namespace oml
