#include "oml/models/text_input.h"

#include "oml/models/extractor_with_mlp.h"

namespace oml::models {

std::optional<TextInputSpec> text_input_of(const Extractor& extractor) {
  if (const auto* source = dynamic_cast<const TextInputSource*>(&extractor)) return source->text_input();
  if (const auto* wrapper = dynamic_cast<const ExtractorWithMLPImpl*>(&extractor))
    return text_input_of(wrapper->backbone());
  return std::nullopt;
}

}  // namespace oml::models
