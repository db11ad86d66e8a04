#pragma once
// How a benchmark program is written: bench/<name>.cpp keeps its names in `namespace
// <name>_benchmark {` (opened after its includes, closed at its end) and, inside it, puts its
// entry point after OML_BENCHMARK(<name>) where a program would write `int main(int argc, char**
// argv)`. bench/CMakeLists.txt builds the files as one executable (benchmarks_main.cpp picks the
// benchmark by the name it is called by: bench_<name> is a link to it), so that LibTorch's
// precompiled header is loaded once for all of them instead of once a program.

#include <map>
#include <string>

namespace oml::bench {

using BenchmarkMain = int (*)(int argc, char** argv);

/// Every benchmark linked into this executable, by name ("ddp" for bench/ddp.cpp).
inline std::map<std::string, BenchmarkMain>& benchmarks() {
  static std::map<std::string, BenchmarkMain> all;
  return all;
}

inline bool register_benchmark(const std::string& name, BenchmarkMain main) {
  benchmarks().emplace(name, main);
  return true;
}

}  // namespace oml::bench

/// The entry point of benchmark `name`, followed by its body: `OML_BENCHMARK(ddp) { ... }`, with
/// argc and argv as main() has them (argv[0] the name it was called by). An exception out of it
/// ends the program with its message and a command's exit code (benchmarks_main.cpp).
#define OML_BENCHMARK(name)                                     \
  int benchmark_main(int argc, char** argv);                    \
  [[maybe_unused]] const bool benchmark_registered =            \
      ::oml::bench::register_benchmark(#name, &benchmark_main); \
  int benchmark_main(int argc, char** argv)
