#pragma once
// What an audio extractor (Extractor::input() == audio) tells the pipelines that feed it: the
// sample rate its front end is built for. The pipelines resample every file to the run's
// `audio.sample_rate` (oml/data/audio_dataset.h) and refuse a run whose rate is not the
// extractor's, since nothing in a waveform says at which rate it was sampled.
//
// ecapa_tdnn implements it (16 kHz); a plugin's audio extractor implements it too, or the
// pipelines cannot check its rate (a ConfigError naming it). A separate interface found by
// dynamic_cast, as TextInputSource (oml/models/text_input.h).

#include <cstdint>
#include <optional>

namespace oml::models {

class Extractor;

/// Implemented by audio extractors alongside Extractor.
class AudioInputSource {
 public:
  virtual ~AudioInputSource() = default;
  /// The rate (Hz) of the waveforms forward() expects.
  virtual int64_t sample_rate() const = 0;
};

/// The sample rate of `extractor`, or of the extractor it wraps (extractor_with_mlp's backbone);
/// nullopt when neither is an AudioInputSource.
std::optional<int64_t> audio_sample_rate_of(const Extractor& extractor);

}  // namespace oml::models
