// The fuzz harness itself: it must see every way an input can break the property, save that
// input and replay it, or the fuzz tests would pass without checking anything.
#include <chrono>
#include <stdexcept>
#include <thread>

#include "fuzz/fuzz.h"
#include "oml/common/error.h"
#include "support/support.h"

namespace harness_tests {

using Catch::Matchers::Contains;
using namespace oml;

TEST_CASE("The fuzz harness reports what breaks the property and saves the input", "[fuzz][harness]") {
  fuzz::ScratchDir out;
  fuzz::Settings settings;
  settings.seed = 3;
  settings.seconds = 1e9;
  settings.iterations = 40;
  settings.input_seconds = 0.05;
  settings.out_dir = out.path();

  fuzz::Target target;
  target.name = "selftest";
  target.extension = ".txt";
  target.seeds = {"seed input"};
  int calls = 0;
  target.entry_points = {{"parse", [&](const std::string&) {
                            switch (++calls) {
                              case 3:
                                throw RuntimeError("an exit-1 error");
                              case 4:
                                throw std::out_of_range("a foreign exception");
                              case 5:
                                throw ConfigError("");  // exit 2, but no message
                              case 6:
                                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                                return;
                              default:
                                if (calls % 2 == 0) throw DataError("rejected");
                            }
                          }}};
  const fuzz::Report report = fuzz::run(target, settings);
  CHECK(report.tried == 40);
  CHECK(report.entries.at(0).accepted + report.entries.at(0).rejected == 36);
  REQUIRE(report.failures.size() == 4);
  CHECK_THAT(report.failures[0], Contains("error (exit 1): an exit-1 error") && Contains("selftest-3-2.txt"));
  CHECK_THAT(report.failures[1], Contains("foreign exception") && Contains("a foreign exception"));
  CHECK_THAT(report.failures[2], Contains("config error (exit 2)"));
  CHECK_THAT(report.failures[3], Contains("more than the bound of 0.05"));

  // The saved input replays alone, through every entry point.
  const auto saved = out / "selftest-3-2.txt";
  REQUIRE(std::filesystem::exists(saved));
  calls = 2;  // the replayed call is the third again
  settings.replay = saved;
  const fuzz::Report replayed = fuzz::run(target, settings);
  CHECK(replayed.tried == 1);
  REQUIRE(replayed.failures.size() == 1);
  CHECK_THAT(replayed.failures[0], Contains("an exit-1 error"));
}

TEST_CASE("Mutations are a function of the seed", "[fuzz][harness]") {
  const std::vector<std::string> corpus{"label,path\n1,a.png\n", "x: [1, 2]\n"};
  fuzz::Mutator a(5, {"&a ", "*a"}), b(5, {"&a ", "*a"}), c(6, {"&a ", "*a"});
  std::vector<std::string> from_a, from_b, from_c;
  for (int i = 0; i < 200; ++i) {
    from_a.push_back(a.mutate(corpus[i % 2], corpus));
    from_b.push_back(b.mutate(corpus[i % 2], corpus));
    from_c.push_back(c.mutate(corpus[i % 2], corpus));
  }
  CHECK(from_a == from_b);
  CHECK(from_a != from_c);
}

}  // namespace harness_tests
