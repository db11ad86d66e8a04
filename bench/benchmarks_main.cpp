// The benchmark programs' main(): bench/CMakeLists.txt links every bench/<name>.cpp into one
// executable, and bench_<name> is a link to it, so the name it is called by picks the benchmark
// (`oml_benchmarks <name> ARGS...` works too).
#include <boost/program_options/errors.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "benchmark.h"
#include "shell/cli.h"

namespace {

// "ddp" for bench_ddp, a path to it, or ddp.
std::string benchmark_name(const char* called) {
  std::string name = std::filesystem::path(called).filename().string();
  return name.rfind("bench_", 0) == 0 ? name.substr(6) : name;
}

// Runs a benchmark with its errors reported as a command's are (docs/contracts.md#exit-codes): a
// message and exit 2 for a bad argument or input, 1 for a failure while running, never an
// uncaught exception's abort.
int run(const std::string& name, oml::bench::BenchmarkMain benchmark, int argc, char** argv) {
  try {
    return benchmark(argc, argv);
  } catch (const boost::program_options::error& e) {
    // The benchmarks that read their options with Boost directly, not through the shell.
    std::fprintf(stderr, "bench_%s: usage error: %s (bench/%s.cpp says how it is called)\n", name.c_str(),
                 e.what(), name.c_str());
    return 2;
  } catch (...) {
    return oml::cli::report_exception("bench_" + name);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto& all = oml::bench::benchmarks();
  // Called as bench_<name> (a link), or as <name>: the launcher starts the ranks of
  // `oml_benchmarks <name> ARGS...` with the argv their parent was given, <name> first.
  if (argc > 0) {
    if (const auto found = all.find(benchmark_name(argv[0])); found != all.end())
      return run(found->first, found->second, argc, argv);
  }
  if (argc > 1) {
    if (const auto found = all.find(benchmark_name(argv[1])); found != all.end())
      return run(found->first, found->second, argc - 1, argv + 1);
  }
  std::string names;
  for (const auto& entry : all) names += (names.empty() ? "" : ", ") + entry.first;
  std::fprintf(stderr,
               "usage: bench_<name> [ARGS...] (a link to this program) or %s <name> [ARGS...]\n"
               "benchmarks: %s\n",
               argc > 0 ? argv[0] : "oml_benchmarks", names.c_str());
  return 2;
}
