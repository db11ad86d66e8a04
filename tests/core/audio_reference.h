#pragma once
// The audio tests' Python references: tests/python/audio_reference.py `command` writes its
// signals and what torchaudio, soundfile and OML compute of them into `dir`.
#include <string>

#include "support/support.h"

namespace oml::test {

inline void audio_reference(const std::string& command, const TempDir& dir) {
  const std::string script = source_path("tests/python/audio_reference.py");
  const auto result =
      run(python() + " " + quote(script) + " " + command + " " + quote(dir.path().string()), 600);
  INFO("audio_reference.py " << command << " failed (scripts/setup.sh --with-tests)\nstdout: " << result.out
                             << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
}

/// audio_reference.py's `signals`, written once per process (the script takes seconds) into a
/// folder the tests only read.
inline const TempDir& audio_signals() {
  return filled_once([](const TempDir& dir) { audio_reference("signals", dir); });
}

}  // namespace oml::test
