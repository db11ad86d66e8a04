// The benchmark programs' main(): bench/CMakeLists.txt links every bench/<name>.cpp into one
// executable, and bench_<name> is a link to it, so the name it is called by picks the benchmark
// (`oml_benchmarks <name> ARGS...` works too).
#include <cstdio>
#include <filesystem>
#include <string>

#include "benchmark.h"

namespace {

// "ddp" for bench_ddp, a path to it, or ddp.
std::string benchmark_name(const char* called) {
  std::string name = std::filesystem::path(called).filename().string();
  return name.rfind("bench_", 0) == 0 ? name.substr(6) : name;
}

}  // namespace

int main(int argc, char** argv) {
  const auto& all = oml::bench::benchmarks();
  // Called as bench_<name> (a link), or as <name>: the launcher starts the ranks of
  // `oml_benchmarks <name> ARGS...` with the argv their parent was given, <name> first.
  if (argc > 0) {
    if (const auto found = all.find(benchmark_name(argv[0])); found != all.end())
      return found->second(argc, argv);
  }
  if (argc > 1) {
    if (const auto found = all.find(benchmark_name(argv[1])); found != all.end())
      return found->second(argc - 1, argv + 1);
  }
  std::string names;
  for (const auto& entry : all) names += (names.empty() ? "" : ", ") + entry.first;
  std::fprintf(stderr,
               "usage: bench_<name> [ARGS...] (a link to this program) or %s <name> [ARGS...]\n"
               "benchmarks: %s\n",
               argc > 0 ? argv[0] : "oml_benchmarks", names.c_str());
  return 2;
}
