#include "oml/models/audio_input.h"

#include "oml/models/extractor_with_mlp.h"

namespace oml::models {

std::optional<int64_t> audio_sample_rate_of(const Extractor& extractor) {
  if (const auto* source = dynamic_cast<const AudioInputSource*>(&extractor)) return source->sample_rate();
  if (const auto* wrapper = dynamic_cast<const ExtractorWithMLPImpl*>(&extractor))
    return audio_sample_rate_of(wrapper->backbone());
  return std::nullopt;
}

}  // namespace oml::models
