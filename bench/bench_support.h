#pragma once
// Pieces the benchmark programs share (header-only: every bench/*.cpp is a program of its own).

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

namespace oml::bench {

/// Peak resident set size of this process (VmHWM), in MB; -1 when /proc does not say.
inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1.0;
}

/// Clustered random embeddings, drawn in the order of ../shared/peer/validate_torch.py: labels
/// ~ U{0..classes-1}, then the class centres, then embedding = centre[label] + noise * N(0, I),
/// handed to `sink(first_row, rows)` in chunks of 65,536 rows so that any n can be generated.
template <class Sink>
void clustered_embeddings(int64_t n, int64_t dim, int64_t classes, double noise, torch::Tensor& labels,
                          Sink&& sink) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  labels = torch::randint(0, classes, {n}, generator);
  const auto centres = torch::randn({classes, dim}, generator);
  constexpr int64_t kChunk = 65536;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t rows = std::min(kChunk, n - start);
    sink(start, centres.index_select(0, labels.narrow(0, start, rows)) +
                    noise * torch::randn({rows, dim}, generator));
  }
}

}  // namespace oml::bench
