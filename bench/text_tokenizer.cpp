// Tokens per second of CPU time of oml::text::Tokenizer on one thread, per tokenizer, over the
// lines bench/text_tokenizer_python.py writes (which also trains the tokenizers and measures HF
// `tokenizers` on the same lines; docs/benchmarks.md).
// Usage: bench_text_tokenizer DIR   (after: python3 bench/text_tokenizer_python.py DIR)
#include <nlohmann/json.hpp>

#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "benchmark.h"
#include "oml/common/error.h"
#include "oml/text/tokenizer.h"

namespace text_tokenizer_benchmark {

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

OML_BENCHMARK(text_tokenizer) {
  if (argc != 2) {
    std::cerr << "usage: bench_text_tokenizer DIR (prepared by bench/text_tokenizer_python.py DIR)\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    std::ifstream in(dir + "/lines.txt");
    OML_CHECK(in.good(), UsageError, dir, "/lines.txt: missing; run bench/text_tokenizer_python.py ", dir,
              " first");
    std::vector<std::string> lines;
    size_t chars = 0;
    for (std::string line; std::getline(in, line);) {
      lines.push_back(nlohmann::json::parse(line).get<std::string>());
      chars += lines.back().size();
    }
    std::cout << "oml::text::Tokenizer, 1 thread, " << lines.size() << " lines, " << chars << " bytes\n";
    for (const std::string kind : {"wordpiece", "bpe", "unigram"}) {
      const auto tokenizer = oml::text::Tokenizer::from_file(dir + "/" + kind + ".tokenizer.json");
      for (size_t i = 0; i < std::min<size_t>(500, lines.size()); ++i) tokenizer.encode(lines[i], "warm-up");
      const double start = cpu_seconds();
      size_t tokens = 0;
      for (size_t i = 0; i < lines.size(); ++i) tokens += tokenizer.encode(lines[i], "line").size();
      const double seconds = cpu_seconds() - start;
      std::cout << "  " << std::left << std::setw(10) << kind << std::right << std::setw(10) << tokens
                << " tokens   encode per line: " << std::setw(8) << std::fixed << std::setprecision(0)
                << tokens / seconds / 1e3 << " k tokens/s\n";
    }
  } catch (const oml::Error& e) {
    std::cerr << e.kind() << ": " << e.what() << "\n";
    return e.exit_code();
  }
  return 0;
}

}  // namespace text_tokenizer_benchmark
