#pragma once
// The audio tests' Python references: tests/python/audio_reference.py `command` writes its
// signals and what torchaudio, soundfile and OML compute of them into a folder.
#include <filesystem>

#include "support/support.h"

namespace oml::test {

/// audio_reference.py's `signals` (audio_tests and ecapa_tdnn_tests read them), made once.
inline const std::filesystem::path& audio_signals() {
  return reference_export("audio_reference.py", "signals");
}

}  // namespace oml::test
