#pragma once
// A small mutation fuzzer for the parsers users feed (docs/building.md#fuzz-tests).
//
// Inputs are mutated from valid seeds that the tests write with oml-cpp's own writers; each one
// goes through the entry points a command uses for that kind of file, and every input must keep
// the exit-code contract (docs/contracts.md#exit-codes): it is accepted (exit 0), or rejected
// with an oml::Error whose exit code is 2 and whose message is not empty. Anything else is a
// bug in the parser and fails the test, with the input saved to a file so that it reproduces:
//   - an exit-1 error (RuntimeError, InternalError, ...), a c10::Error, std::bad_alloc, any
//     other exception (the command edge would turn each of them into exit 1);
//   - an input that takes longer than the per-input time bound;
//   - the process's peak resident memory growing by more than the memory bound;
//   - a crash (the signal handler saves the input, then the signal kills the binary, which
//     ctest reports) or a hang (a watchdog saves the input and aborts).
//
// Deterministic: the same seed gives the same inputs in the same order. Settings come from
// the environment (see Settings).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace oml::fuzz {

namespace fs = std::filesystem;

/// Budget and reproduction, read from the environment:
///   OML_FUZZ_SEED           random seed (default 1; printed with the figures)
///   OML_FUZZ_SECONDS        time per parser (default: each test's short CI budget)
///   OML_FUZZ_ITERATIONS     inputs per parser (default 0: as many as fit in the time)
///   OML_FUZZ_INPUT_SECONDS  per-input time bound (default 2)
///   OML_FUZZ_MEMORY_MB      bound on the growth of the peak resident memory (default 1024)
///   OML_FUZZ_OUT            folder for failing inputs (default $TMPDIR/oml-fuzz)
///   OML_FUZZ_REPLAY         a saved input: the test case of its parser runs that input alone
struct Settings {
  uint64_t seed = 1;
  double seconds = 0;
  int64_t iterations = 0;
  double input_seconds = 2.0;
  int64_t memory_bytes = int64_t{1} << 30;
  fs::path out_dir;
  std::optional<fs::path> replay;
};

/// The settings, with `default_seconds` as the time budget unless OML_FUZZ_SECONDS is set.
Settings settings_from_environment(double default_seconds);

/// Byte-level and dictionary mutations, all drawn from one seeded generator.
class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<std::string> dictionary);

  /// 1 to 5 stacked random mutations of `input`; `corpus` provides splice partners.
  std::string mutate(const std::string& input, const std::vector<std::string>& corpus);

  /// One mutation of each kind (flip, insert, delete, duplicate, truncate, splice, ...).
  std::string mutate_once(const std::string& input, const std::vector<std::string>& corpus);

  std::size_t below(std::size_t n);  ///< uniform in [0, n), 0 when n == 0
  bool chance(double probability);
  const std::string& pick(const std::vector<std::string>& items);
  /// A dictionary token, an interesting number or a few random bytes.
  std::string token();
  const std::vector<std::string>& dictionary() const { return dictionary_; }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> dictionary_;
};

/// Numbers at the edges of the integer and floating-point types, and their spellings.
const std::vector<std::string>& interesting_numbers();

/// One way a command reads the input (e.g. "load_checkpoint + resume"). Returns normally when
/// the input is accepted; throws when it is rejected.
struct EntryPoint {
  std::string name;
  std::function<void(const std::string& input)> run;
};

/// A parser under test.
struct Target {
  std::string name;       ///< "config", "dataframe", ...: the prefix of saved inputs and the tag
  std::string extension;  ///< of saved inputs, e.g. ".npy"
  std::vector<std::string> seeds;
  std::vector<std::string> dictionary;
  std::vector<EntryPoint> entry_points;  ///< every input goes through each of them
  /// A new input from a corpus entry; default: Mutator::mutate.
  std::function<std::string(Mutator&, const std::string& input, const std::vector<std::string>& corpus)>
      mutate;
  /// Extra lines describing an input in a failure message (e.g. its --set flags); optional.
  std::function<std::string(const std::string& input)> describe;
  /// Inputs larger than this are cut (parsers are fed files of a few KiB).
  std::size_t max_input_size = 64 * 1024;
};

struct EntryStats {
  std::string name;
  int64_t accepted = 0;
  int64_t rejected = 0;  ///< with an exit-2 error and a message
  /// Distinct rejection messages (their first 100 characters, numbers left out): how many of
  /// the parser's checks the inputs reached.
  std::set<std::string> rejections;
};

struct Report {
  uint64_t seed = 0;
  int64_t tried = 0;
  double seconds = 0;
  double slowest_input_s = 0;
  int64_t memory_growth_bytes = 0;  ///< growth of the peak resident memory (VmHWM) over the run
  std::vector<EntryStats> entries;
  std::vector<std::string> failures;  ///< one message per distinct failure, with the saved input
};

/// Fuzzes `target` within `settings` (or replays OML_FUZZ_REPLAY when it is this target's).
Report run(const Target& target, const Settings& settings);

/// run() with the test's default budget, prints the figures, and fails the Catch2 test case
/// with every distinct failure.
void check(const Target& target, double default_seconds);

/// A fresh folder for the files fed to the parsers, removed when destroyed: in /dev/shm when
/// there is one. Every input is written to the same path, and ext4 flushes a file rewritten
/// after truncation to the disk on close: on a busy disk that made each input wait for I/O.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

/// Writes `bytes` to `path` (creating folders).
void write_bytes(const fs::path& path, const std::string& bytes);
std::string read_bytes(const fs::path& path);

}  // namespace oml::fuzz
