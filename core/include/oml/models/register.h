#pragma once
// Registration of the built-in extractors and pairwise models.

namespace oml {
struct Registries;
namespace models {

/// Adds `resnet`, `vit`, `vit_clip`, `vit_unicom`, `hf_text_encoder`, `conv_net`, `extractor_with_mlp`
/// (extractors) and `linear_siamese`, `trivial_distance_siamese`, `concat_siamese` (pairwise models).
void register_builtin_models(Registries& registries);

}  // namespace models
}  // namespace oml
