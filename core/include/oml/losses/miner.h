#pragma once
// Miners: choose which triplets or pairs of a batch a loss looks at.

#include <torch/types.h>

#include <string>

namespace oml::losses {

/// Triplets as indices into `pool`. The pool always starts with the batch's embeddings (rows
/// 0..B-1, keeping their gradient); miners may append rows (label means, a memory bank), which
/// are listed after the batch.
struct TripletSet {
  torch::Tensor pool;       ///< [M, D], M >= B
  torch::Tensor anchors;    ///< [T] int64 indices into pool
  torch::Tensor positives;  ///< [T]
  torch::Tensor negatives;  ///< [T]
  /// [T] bool, or undefined when every triplet counts. A miner that keeps its output's size
  /// independent of the labels' values (so that it reads nothing back from a device) lists a
  /// triplet for every anchor and marks false the ones that are not triplets; those count
  /// nowhere (their indices are in range, their values meaningless).
  torch::Tensor valid;
  /// [T] bool, or undefined: true where anchor, positive and negative are all batch rows, false
  /// where one comes from a memory bank (OML's `is_original_tri`, triplets_with_memory's). When
  /// defined, the loss also logs its values for each kind (OML's `*_orig` / `*_bank` logs).
  torch::Tensor from_batch;
  /// Triplets listed, placeholders included.
  int64_t size() const { return anchors.defined() ? anchors.numel() : 0; }
};

/// Pairs of batch rows; is_negative is 1 for pairs with different labels (float, the BCE target).
struct PairSet {
  torch::Tensor ids1, ids2;   ///< [P] int64
  torch::Tensor is_negative;  ///< [P] float
};

/// The pairs PML's pair losses use (PML's (a1, p, a2, n) indices tuple) as masks over the batch.
struct MinedPairs {
  torch::Tensor positive;  ///< [B, B] bool: (anchor, positive) pairs
  torch::Tensor negative;  ///< [B, B] bool: (anchor, negative) pairs
};

/// Base of every miner (the registry's product). A miner produces triplets (TripletMiner),
/// pairs for pairwise training (PairMiner) or pairs for PML's pair losses (PairSelectionMiner);
/// losses check which one they were given. Building a
/// miner is cheap and touches nothing (no files, no devices, no randomness): a loss's parse
/// builds its `miner:` to learn which kind it is.
class Miner {
 public:
  virtual ~Miner() = default;
};

/// Contract: `mine(embeddings [B, D], labels [B])` returns triplets with label(anchor) ==
/// label(positive) != label(negative) and anchor != positive (as items), at least one of them
/// valid (TripletSet::valid), for a batch that passes check_labels(). Random choices use the
/// global torch generator (saved with the run's RNG state for resuming). Miners may keep state
/// across batches (memory banks); the batch's rows keep their gradient.
class TripletMiner : public Miner {
 public:
  virtual TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) = 0;
  /// The checks that read the labels' values [B] (CPU): DataError when the batch has no triplet
  /// (one label only, no label with two items). A miner whose mine() reads no value back skips
  /// them there; a loss runs them on the host (Criterion::check_labels).
  virtual void check_labels(const torch::Tensor& labels);
  /// Triplets anchored on the first `n_anchors` rows only; every row may be a positive or a
  /// negative (OML's `ignore_anchor_mask`: miner_with_bank's batch as anchors, its bank as
  /// partners). Valid triplets as mine()'s, at least one for labels that pass
  /// check_anchored_labels. The default: mine(), its triplets with other anchors marked not valid,
  /// DataError if none is left (read back: a plugin's miner may anchor anywhere); the built-in
  /// row miners list the anchors' triplets only and read nothing back.
  virtual TripletSet mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                                   int64_t n_anchors);
  /// check_labels for mine_anchored, on the host labels [M]: DataError unless one of the first
  /// `n_anchors` rows anchors a triplet (has a positive and a negative among all M rows).
  virtual void check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors);
  /// Whether the triplets' anchors are rows of the embeddings given (false: the miner adds
  /// anchors of its own, as hard_cluster's label means, so it cannot anchor on given rows).
  virtual bool anchors_on_rows() const { return true; }
};

/// Contract: `mine` returns at least one pair of distinct batch rows (DataError otherwise).
class PairMiner : public Miner {
 public:
  virtual PairSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) = 0;
};

/// Contract: `mine(embeddings [B, D], labels [B])` marks positive pairs only where the labels are
/// equal and i != j, negative pairs only where they differ. It may mark none (nothing in the batch
/// is hard): the loss is then 0, as PML's. Runs without gradient, like PML's miners.
class PairSelectionMiner : public Miner {
 public:
  virtual MinedPairs mine(const torch::Tensor& embeddings, const torch::Tensor& labels) = 0;
};

}  // namespace oml::losses
