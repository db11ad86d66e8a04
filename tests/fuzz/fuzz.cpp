#include "fuzz/fuzz.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <new>
#include <set>
#include <sstream>
#include <thread>
#include <typeinfo>

#include "oml/common/error.h"
#include "oml/common/logging.h"

namespace oml::fuzz {

namespace {

using Clock = std::chrono::steady_clock;

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A value of /proc/self/status in bytes ("VmHWM", "VmSize"); 0 when absent.
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

// ---- crash and hang reporting ----------------------------------------------------------------
// The input being parsed, for the signal handler and the watchdog: both write it to
// g_crash_path, so that a crash or a hang reproduces like any other failure.

const char* g_input = nullptr;
std::size_t g_input_size = 0;
char g_crash_path[4096] = {};
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[sizeof(kFatalSignals) / sizeof(int)];

// Only async-signal-safe calls (open, write, close, sigaction, raise).
void save_current_input() {
  if (g_input == nullptr || g_crash_path[0] == '\0') return;
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  for (std::size_t done = 0; done < g_input_size;) {
    const ssize_t n = ::write(fd, g_input + done, g_input_size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  const char prefix[] = "\noml fuzz: the input that crashed or hung is saved in ";
  [[maybe_unused]] ssize_t ignored = ::write(2, prefix, sizeof(prefix) - 1);
  ignored = ::write(2, g_crash_path, std::strlen(g_crash_path));
  ignored = ::write(2, "\n", 1);
}

void on_fatal_signal(int signal) {
  save_current_input();
  g_input = nullptr;  // once
  // Hand the signal on to the handler that was there before (Catch2 reports the test case).
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i) {
    if (kFatalSignals[i] == signal) ::sigaction(signal, &g_previous[i], nullptr);
  }
  ::raise(signal);
}

/// Installs the crash handler and the watchdog for the length of one fuzz run.
class CrashGuard {
 public:
  explicit CrashGuard(double hang_seconds) : hang_seconds_(hang_seconds) {
    struct sigaction action {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < std::size(kFatalSignals); ++i)
      ::sigaction(kFatalSignals[i], &action, &g_previous[i]);
    watchdog_ = std::thread([this] { watch(); });
  }
  ~CrashGuard() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    for (std::size_t i = 0; i < std::size(kFatalSignals); ++i)
      ::sigaction(kFatalSignals[i], &g_previous[i], nullptr);
    g_input = nullptr;
  }
  CrashGuard(const CrashGuard&) = delete;
  CrashGuard& operator=(const CrashGuard&) = delete;

  void begin(const std::string& input, const fs::path& crash_path) {
    std::snprintf(g_crash_path, sizeof(g_crash_path), "%s", crash_path.c_str());
    g_input = input.data();
    g_input_size = input.size();
    started_ns_.store(Clock::now().time_since_epoch().count());
  }
  void end() {
    started_ns_.store(0);
    g_input = nullptr;
  }

 private:
  // An input still running after hang_seconds will not finish: save it and stop the binary
  // (ctest reports the abort), rather than wait for ctest's timeout without the input.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return done_; })) {
      const auto started = started_ns_.load();
      if (started == 0) continue;
      const double running =
          std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(started)).count();
      if (running > hang_seconds_) {
        std::fprintf(stderr, "\noml fuzz: an input has run for %.0f s (hang?)\n", running);
        save_current_input();
        std::_Exit(134);
      }
    }
  }

  double hang_seconds_;
  std::atomic<Clock::rep> started_ns_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread watchdog_;
};

/// Caps the address space for the length of one fuzz run. The property checks the growth of
/// the peak resident memory (VmHWM) after each input; the cap is a safety net on a shared
/// machine: an input that would make a parser allocate tens of GiB fails inside the parser
/// (std::bad_alloc or a c10::Error, reported as a failure) instead of swapping the machine.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(int64_t headroom_bytes) {
    if (::getrlimit(RLIMIT_AS, &previous_) != 0) return;
    rlimit capped = previous_;
    const auto wanted = static_cast<rlim_t>(proc_status_bytes("VmSize") + headroom_bytes);
    if (previous_.rlim_cur != RLIM_INFINITY && previous_.rlim_cur <= wanted) return;
    capped.rlim_cur = wanted;
    active_ = ::setrlimit(RLIMIT_AS, &capped) == 0;
  }
  ~AddressSpaceCap() {
    if (active_) ::setrlimit(RLIMIT_AS, &previous_);
  }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;

 private:
  rlimit previous_{};
  bool active_ = false;
};

// ---- the property ------------------------------------------------------------------------------

enum class Outcome { accepted, rejected, violation };

// Runs one entry point; on a violation `message` says what happened.
Outcome classify(const EntryPoint& entry, const std::string& input, std::string& message) {
  const auto first_line = [](const std::string& text) { return text.substr(0, text.find('\n')); };
  try {
    entry.run(input);
    return Outcome::accepted;
  } catch (const Error& e) {
    if (e.exit_code() == 2 && std::strlen(e.what()) > 0) {
      message = e.what();
      return Outcome::rejected;
    }
    message =
        std::string(e.kind()) + " (exit " + std::to_string(e.exit_code()) + "): " + first_line(e.what());
  } catch (const c10::Error& e) {
    message = "c10::Error (exit 1): " + first_line(e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    message = "std::bad_alloc (exit 1: out of memory)";
  } catch (const std::exception& e) {
    message = std::string("foreign exception ") + typeid(e).name() + " (exit 1): " + first_line(e.what());
  } catch (...) {
    message = "an exception that is not a std::exception (exit 1)";
  }
  return Outcome::violation;
}

// Failures that differ only in numbers and quoted values are one failure.
std::string signature(const std::string& entry, const std::string& message) {
  std::string out = entry + ": ";
  bool quoted = false;
  for (char c : message.substr(0, 200)) {
    if (c == '\'') {
      quoted = !quoted;
      out += c;
    } else if (quoted) {
      continue;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      if (out.back() != '#') out += '#';
    } else {
      out += c;
    }
  }
  return out;
}

std::string reproduce_hint(const Target& target, const fs::path& saved) {
  return "reproduce: OML_FUZZ_REPLAY=" + saved.string() + " build/tests/oml_fuzz_tests \"[" + target.name +
         "]\"";
}

std::string format_bytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

Report replay(const Target& target, const fs::path& path) {
  Report report;
  const std::string input = read_bytes(path);
  report.tried = 1;
  for (const auto& entry : target.entry_points) {
    EntryStats stats;
    stats.name = entry.name;
    std::string message;
    const auto start = Clock::now();
    const Outcome outcome = classify(entry, input, message);
    const double took = seconds_since(start);
    std::cout << "replay " << path.string() << " through " << entry.name << ": "
              << (outcome == Outcome::accepted   ? "accepted"
                  : outcome == Outcome::rejected ? "rejected with exit 2: " + message
                                                 : "VIOLATION: " + message)
              << " (" << took << " s)\n";
    if (outcome == Outcome::accepted) ++stats.accepted;
    if (outcome == Outcome::rejected) ++stats.rejected;
    if (outcome == Outcome::violation) report.failures.push_back(entry.name + ": " + message);
    report.entries.push_back(stats);
  }
  return report;
}

}  // namespace

// ---- settings ------------------------------------------------------------------------------------

Settings settings_from_environment(double default_seconds) {
  Settings s;
  s.seconds = default_seconds;
  if (auto v = env("OML_FUZZ_SEED")) s.seed = std::stoull(*v);
  if (auto v = env("OML_FUZZ_SECONDS")) s.seconds = std::stod(*v);
  if (auto v = env("OML_FUZZ_ITERATIONS")) s.iterations = std::stoll(*v);
  if (auto v = env("OML_FUZZ_INPUT_SECONDS")) s.input_seconds = std::stod(*v);
  if (auto v = env("OML_FUZZ_MEMORY_MB")) s.memory_bytes = std::stoll(*v) * 1024 * 1024;
  s.out_dir = env("OML_FUZZ_OUT") ? fs::path(*env("OML_FUZZ_OUT")) : fs::temp_directory_path() / "oml-fuzz";
  if (auto v = env("OML_FUZZ_REPLAY")) s.replay = fs::path(*v);
  // An iteration count alone is a budget in itself.
  if (env("OML_FUZZ_ITERATIONS") && !env("OML_FUZZ_SECONDS")) s.seconds = 1e9;
  return s;
}

// ---- mutations -----------------------------------------------------------------------------------

const std::vector<std::string>& interesting_numbers() {
  static const std::vector<std::string> numbers{"0",
                                                "-0",
                                                "1",
                                                "-1",
                                                "2",
                                                "3.0",
                                                "1.5",
                                                "-1.5",
                                                "127",
                                                "128",
                                                "255",
                                                "256",
                                                "-128",
                                                "65535",
                                                "65536",
                                                "2147483647",
                                                "2147483648",
                                                "-2147483649",
                                                "4294967295",
                                                "4294967296",
                                                "9007199254740993",
                                                "9223372036854775807",
                                                "9223372036854775808",
                                                "-9223372036854775808",
                                                "-9223372036854775809",
                                                "18446744073709551615",
                                                "18446744073709551616",
                                                "99999999999999999999999999999999",
                                                "1e308",
                                                "1e309",
                                                "-1e309",
                                                "1e-400",
                                                "nan",
                                                "NaN",
                                                "-nan",
                                                "inf",
                                                "-inf",
                                                ".inf",
                                                "-.inf",
                                                ".nan",
                                                "0x10",
                                                "0o17",
                                                "1_000",
                                                "1e3",
                                                "+1",
                                                "00",
                                                "1.",
                                                ".5",
                                                ""};
  return numbers;
}

Mutator::Mutator(uint64_t seed, std::vector<std::string> dictionary)
    : rng_(seed), dictionary_(std::move(dictionary)) {}

std::size_t Mutator::below(std::size_t n) {
  if (n == 0) return 0;
  return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
}

bool Mutator::chance(double probability) { return std::bernoulli_distribution(probability)(rng_); }

const std::string& Mutator::pick(const std::vector<std::string>& items) {
  return items.at(below(items.size()));
}

std::string Mutator::token() {
  const std::size_t kind = below(20);
  if (kind < 12 && !dictionary_.empty()) return pick(dictionary_);
  if (kind < 17) return pick(interesting_numbers());
  std::string bytes(1 + below(4), '\0');
  for (auto& c : bytes) c = static_cast<char>(below(256));
  return bytes;
}

std::string Mutator::mutate_once(const std::string& input, const std::vector<std::string>& corpus) {
  std::string s = input;
  const std::size_t n = s.size();
  switch (below(12)) {
    case 0:  // flip one bit
      if (n == 0) return token();
      s[below(n)] ^= static_cast<char>(1u << below(8));
      return s;
    case 1: {  // one byte set to an edge value
      if (n == 0) return token();
      static const char kEdges[] = {'\0', '\xff', '\x7f', '\x80', '\n', '\r', '"', '\'', ',', ':', ' ', '\t'};
      s[below(n)] = chance(0.7) ? kEdges[below(sizeof(kEdges))] : static_cast<char>(below(256));
      return s;
    }
    case 2:
    case 3:  // insert a token
      return s.insert(below(n + 1), token());
    case 4: {  // overwrite with a token
      const std::string t = token();
      const std::size_t at = below(n + 1);
      return s.replace(at, std::min(t.size(), n - at), t);
    }
    case 5: {  // delete a range
      if (n == 0) return s;
      const std::size_t at = below(n);
      return s.erase(at, 1 + below(std::min<std::size_t>(64, n - at)));
    }
    case 6: {  // duplicate a range somewhere else
      if (n == 0) return s;
      const std::size_t at = below(n);
      const std::string range = s.substr(at, 1 + below(std::min<std::size_t>(256, n - at)));
      return s.insert(below(n + 1), range);
    }
    case 7:  // truncate
      s.resize(below(n + 1));
      return s;
    case 8: {  // splice: the head of this input and the tail of another
      const std::string& other = corpus.empty() ? input : pick(corpus);
      return s.substr(0, below(n + 1)) + other.substr(below(other.size() + 1));
    }
    case 9: {  // a number replaced by one at the edges
      std::vector<std::pair<std::size_t, std::size_t>> runs;
      for (std::size_t i = 0; i < n;) {
        if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < n && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
        runs.emplace_back(i, j - i);
        i = j;
      }
      if (runs.empty()) return s.insert(below(n + 1), pick(interesting_numbers()));
      const auto [at, length] = runs[below(runs.size())];
      return s.replace(at, length, pick(interesting_numbers()));
    }
    case 10: {  // a whole line deleted, duplicated or moved (text formats)
      std::vector<std::size_t> starts{0};
      for (std::size_t i = 0; i < n; ++i)
        if (s[i] == '\n' && i + 1 < n) starts.push_back(i + 1);
      const std::size_t a = starts[below(starts.size())];
      const std::size_t a_end = s.find('\n', a) == std::string::npos ? n : s.find('\n', a) + 1;
      const std::string line = s.substr(a, a_end - a);
      const std::size_t b = starts[below(starts.size())];
      if (chance(0.4)) return s.erase(a, a_end - a);
      if (chance(0.5)) return s.insert(b, line);
      s.erase(a, a_end - a);
      return s.insert(std::min(b, s.size()), line);
    }
    default: {  // random bytes
      std::string bytes(1 + below(8), '\0');
      for (auto& c : bytes) c = static_cast<char>(below(256));
      return s.insert(below(n + 1), bytes);
    }
  }
}

std::string Mutator::mutate(const std::string& input, const std::vector<std::string>& corpus) {
  std::string out = mutate_once(input, corpus);
  for (int extra = 0; extra < 4 && chance(0.45); ++extra) out = mutate_once(out, corpus);
  return out;
}

// ---- the loop -------------------------------------------------------------------------------------

ScratchDir::ScratchDir() {
  std::error_code ec;
  const fs::path shm = "/dev/shm";
  const fs::path parent =
      fs::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0 ? shm : fs::temp_directory_path();
  std::string pattern = (parent / "oml-fuzz-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + parent.string());
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Report run(const Target& target, const Settings& settings) {
  if (settings.replay) return replay(target, *settings.replay);

  // Each parser draws its own sequence: the same seed does not give every parser the same moves.
  const uint64_t seed = settings.seed ^ std::hash<std::string>{}(target.name);
  Mutator mutator(seed, target.dictionary);
  Report report;
  report.seed = settings.seed;
  for (const auto& entry : target.entry_points) {
    report.entries.emplace_back();
    report.entries.back().name = entry.name;
  }

  constexpr std::size_t kCorpusLimit = 512;
  constexpr std::size_t kMaxFailures = 12;
  std::vector<std::string> corpus = target.seeds;
  std::set<std::string> seen_failures;
  fs::create_directories(settings.out_dir);

  const AddressSpaceCap cap(4 * settings.memory_bytes);
  CrashGuard guard(std::max(20.0, 10 * settings.input_seconds));
  const int64_t baseline_peak = proc_status_bytes("VmHWM");
  const auto start = Clock::now();
  while (seconds_since(start) < settings.seconds &&
         (settings.iterations == 0 || report.tried < settings.iterations)) {
    // Half the parents are seeds: the corpus must not drift away from what users write.
    const std::string& parent = mutator.chance(0.5) ? mutator.pick(target.seeds) : mutator.pick(corpus);
    std::string input =
        target.mutate ? target.mutate(mutator, parent, corpus) : mutator.mutate(parent, corpus);
    if (input.size() > target.max_input_size) input.resize(target.max_input_size);
    const std::string base =
        target.name + "-" + std::to_string(settings.seed) + "-" + std::to_string(report.tried);
    const fs::path saved = settings.out_dir / (base + target.extension);
    ++report.tried;

    bool first_accepted = false;
    for (std::size_t e = 0; e < target.entry_points.size(); ++e) {
      const EntryPoint& entry = target.entry_points[e];
      std::string message;
      guard.begin(input, saved);
      const auto input_start = Clock::now();
      Outcome outcome = classify(entry, input, message);
      const double took = seconds_since(input_start);
      guard.end();
      report.slowest_input_s = std::max(report.slowest_input_s, took);
      const int64_t growth = proc_status_bytes("VmHWM") - baseline_peak;
      report.memory_growth_bytes = std::max(report.memory_growth_bytes, growth);
      if (outcome != Outcome::violation && took > settings.input_seconds) {
        outcome = Outcome::violation;
        message = "took " + std::to_string(took) + " s, more than the bound of " +
                  std::to_string(settings.input_seconds) + " s per input";
      }
      if (outcome != Outcome::violation && growth > settings.memory_bytes) {
        outcome = Outcome::violation;
        message = "the peak resident memory grew by " + format_bytes(growth) + " (bound " +
                  format_bytes(settings.memory_bytes) + ")";
      }
      if (outcome == Outcome::accepted) ++report.entries[e].accepted;
      if (outcome == Outcome::rejected) {
        ++report.entries[e].rejected;
        report.entries[e].rejections.insert(signature("", message).substr(0, 100));
      }
      if (e == 0) first_accepted = outcome == Outcome::accepted;
      if (outcome != Outcome::violation) continue;
      if (seen_failures.size() >= kMaxFailures ||
          !seen_failures.insert(signature(entry.name, message)).second)
        continue;
      write_bytes(saved, input);
      std::string failure = entry.name + ": " + message + "\n  input saved in " + saved.string() + "\n  " +
                            reproduce_hint(target, saved);
      if (target.describe) failure += "\n" + target.describe(input);
      report.failures.push_back(failure);
    }
    // Accepted mutants are kept as parents: mutating a valid file again goes deeper than
    // mutating the seeds alone. Not those much smaller than their parent: an empty config or a
    // header-only CSV is valid too, and a corpus of them would test nothing.
    if (first_accepted && input != parent && 2 * input.size() >= parent.size()) {
      if (corpus.size() < kCorpusLimit) {
        corpus.push_back(std::move(input));
      } else {
        corpus[target.seeds.size() + mutator.below(kCorpusLimit - target.seeds.size())] = std::move(input);
      }
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

void check(const Target& target, double default_seconds) {
  // Parsers warn about odd but valid inputs (a label with two categories); thousands of such
  // lines would bury the figures.
  log::set_level(log::Level::error);
  // Every c10::Error symbolises a C++ backtrace, which costs milliseconds: most of the time of
  // a damaged zip's rejection. The fuzzer never prints them.
  c10::SetStackTraceFetcher([] { return std::string(); });
  const Settings settings = settings_from_environment(default_seconds);
  if (settings.replay && fs::path(*settings.replay).filename().string().rfind(target.name + "-", 0) != 0) {
    SUCCEED("OML_FUZZ_REPLAY names another parser's input");
    return;
  }
  const Report report = run(target, settings);
  log::set_level(log::Level::info);
  if (!settings.replay) {
    std::ostringstream figures;
    figures << "fuzz " << target.name << ": " << report.tried << " inputs in " << report.seconds
            << " s (seed " << report.seed << ", slowest input " << report.slowest_input_s
            << " s, peak memory +" << format_bytes(report.memory_growth_bytes) << ")";
    for (const auto& e : report.entries)
      figures << "\n  " << e.name << ": " << e.accepted << " accepted, " << e.rejected
              << " rejected with exit 2 (" << e.rejections.size() << " kinds of message)";
    std::cout << figures.str() << "\n";
    CHECK(report.tried > 0);
  }
  for (const auto& failure : report.failures) {
    std::cout << "FAILURE " << failure << "\n";
    FAIL_CHECK(failure);
  }
}

}  // namespace oml::fuzz
