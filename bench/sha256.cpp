// How fast oml::sha256_file_hex hashes a file (what oml-index, oml-search and oml-serve do to the
// model file of an index folder): the file is hashed `rounds` times, the first read from disk or
// the page cache as it is, the rest from the page cache.
//
//   bench_sha256 FILE [rounds]      (default: 3)
//
// Prints the digest, and per round the seconds and MB/s (1 MB = 10^6 bytes); the best round last.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "benchmark.h"
#include "oml/common/sha256.h"

namespace sha256_benchmark {

OML_BENCHMARK(sha256) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: bench_sha256 FILE [rounds]\n");
    return 2;
  }
  const std::filesystem::path file = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(file, ec);
  if (ec || rounds < 1) {
    std::fprintf(stderr, "bench_sha256: %s is not a readable file, or rounds < 1\n", file.c_str());
    return 2;
  }
  double best = 0.0;
  std::string digest;
  for (int round = 1; round <= rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    digest = oml::sha256_file_hex(file);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mb_per_s = static_cast<double>(bytes) / 1e6 / seconds;
    best = std::max(best, mb_per_s);
    std::printf("round %d: %.3f s, %.0f MB/s\n", round, seconds, mb_per_s);
  }
  std::printf("%s  %s\n%.0f MB, best %.0f MB/s\n", digest.c_str(), file.c_str(),
              static_cast<double>(bytes) / 1e6, best);
  return 0;
}

}  // namespace sha256_benchmark
