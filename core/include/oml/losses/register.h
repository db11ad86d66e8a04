#pragma once
// Registration of the built-in losses and miners.

namespace oml {
struct Registries;
namespace losses {

/// Adds the losses `triplet_with_miner`, `arcface`, `surrogate_precision`, PML's `contrastive`,
/// `multi_similarity`, `supcon`, `ntxent`, `circle`, `proxy_anchor`, `proxy_nca`, `soft_triple`,
/// `cosface`, `sub_center_arcface` and the miners
/// `all_triplets`, `hard_triplets`, `n_hard_triplets`, `hard_cluster`, `triplets_with_memory`,
/// `miner_with_bank`, `pairs`.
void register_builtin_losses(Registries& registries);

}  // namespace losses
}  // namespace oml
