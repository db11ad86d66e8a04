#pragma once
// The built-in miners (docs/models.md#miners-criterionargsminer). All work in O(B^2) memory (plus
// their output); none builds a B x B x B tensor.

#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oml/losses/distance.h"
#include "oml/losses/miner.h"

namespace oml::losses {

/// Every valid triplet of the batch; when there are more than `max_output_triplets`, that many
/// distinct ones drawn uniformly at random. No cap by default, as OML's (its `sys.maxsize`):
/// a P x K batch has B (K - 1) (B - K) triplets, 342,000 for OML's CARS config (20 x 10).
class AllTripletsMiner : public TripletMiner {
 public:
  static constexpr int64_t kNoCap = std::numeric_limits<int64_t>::max();
  explicit AllTripletsMiner(int64_t max_output_triplets = kNoCap);
  /// config::ArgumentError unless max_output_triplets > 0.
  static void check(int64_t max_output_triplets);
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  /// Lists the anchors' triplets only, and draws among them when they exceed the cap.
  TripletSet mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                           int64_t n_anchors) override;
  void check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) override;

 private:
  int64_t max_output_triplets_;
};

/// Per anchor: the farthest positive and the nearest negative (the anchor itself is never its
/// own positive). One triplet per batch row, whatever the labels: an anchor without a positive
/// or a negative is a placeholder marked not valid, so mine() reads nothing back (no `nonzero`,
/// no check of the labels' values: check_labels does those on the host).
class HardTripletsMiner : public TripletMiner {
 public:
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  /// One triplet per anchor row, its partners from every row.
  TripletSet mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                           int64_t n_anchors) override;
  void check_labels(const torch::Tensor& labels) override;
  void check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) override;
};

/// A 1-based inclusive range of hardness ranks: {1, n} = the n hardest, {a, b} = a-th..b-th.
using HardnessRange = std::pair<int64_t, int64_t>;

/// Per anchor: every combination of its positives with hardness rank in `positive` (farthest
/// first) and negatives with rank in `negative` (nearest first). Listed as a fixed grid of ranks
/// per anchor whatever the labels, the ranks an anchor lacks marked not valid, so that mine()
/// reads nothing back; check_labels (host) makes sure one anchor has both ranks' first.
class NHardTripletsMiner : public TripletMiner {
 public:
  NHardTripletsMiner(HardnessRange positive, HardnessRange negative);
  /// config::ArgumentError unless both ranges are 1 <= a <= b.
  static void check(HardnessRange positive, HardnessRange negative);
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  /// The grid of ranks per anchor row, its partners ranked among every row.
  TripletSet mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                           int64_t n_anchors) override;
  void check_labels(const torch::Tensor& labels) override;
  /// One of the anchor rows has both ranges' first ranks among all rows.
  void check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) override;

 private:
  HardnessRange positive_, negative_;
};

/// Label means as anchors: for each label, positive = its item farthest from its mean, negative =
/// the nearest other label's mean. Needs the same number of items per label (P x K batches).
class HardClusterMiner : public TripletMiner {
 public:
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  bool anchors_on_rows() const override { return false; }
};

/// OML's TripletMinerWithMemory. A bank of `bank_size_in_batches` batches' detached embeddings
/// and labels, written over oldest first after each batch is mined. Before the first batches
/// fill it, it holds OML's stand-ins: labels -1..-B (B the batch size) once per batch slot, and
/// one-hot embeddings (a 1 in column min(|label|, D - 1)). From a batch whose N triplets are all
/// its triplets, it mines:
///   1. those N triplets;
///   2. M = N (tri_expand_k - 1) / 2 (rounded down) tries of an anchor and a positive from the bank
///      (labels drawn uniformly, all their ordered pairs pooled until there are M, M of them kept
///      at random) with a random batch row as the negative, kept where the labels differ;
///   3. M tries of a random ordered positive pair of the batch with a random bank row as the
///      negative, kept where the labels differ.
/// Parts 2 and 3 are marked not from the batch (TripletSet::from_batch). Every batch must have the
/// bank's batch size (P x K batches do), and labels must be >= 0 (the trainer's are: training
/// labels are numbered from 0) so that no label is a stand-in's. Where no bank label has two
/// rows (bank_size_in_batches 1 before the bank has a real batch), part 2 is empty.
class TripletsWithMemoryMiner : public TripletMiner {
 public:
  TripletsWithMemoryMiner(int64_t bank_size_in_batches, int64_t tri_expand_k);
  /// config::ArgumentError unless both are >= 1.
  static void check(int64_t bank_size_in_batches, int64_t tri_expand_k);
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  /// The batch's triplets, and labels >= 0 (DataError).
  void check_labels(const torch::Tensor& labels) override;
  /// Its anchors may be rows of its own bank.
  bool anchors_on_rows() const override { return false; }

 private:
  int64_t bank_size_in_batches_, tri_expand_k_;
  int64_t batch_size_ = 0;         ///< the bank's batch size, from the first batch
  torch::Tensor bank_embeddings_;  ///< [bank_size_in_batches * B, D] on the batch's device
  torch::Tensor bank_labels_;      ///< [bank_size_in_batches * B] int64 on the CPU
  int64_t next_ = 0;               ///< the bank row the next batch starts at
};

/// OML's MinerWithBank: runs another triplet miner on the batch plus the detached embeddings of
/// the last `bank_size_in_batches` batches — once that many have passed; before, on the batch
/// alone — with the current batch's rows as the only anchors (TripletMiner::mine_anchored). The
/// labels are listed and checked on the host (the step's declared host labels, and the bank's
/// own host copies), so that mining reads nothing back from a device.
class MinerWithBank : public TripletMiner {
 public:
  MinerWithBank(int64_t bank_size_in_batches, std::shared_ptr<TripletMiner> miner);
  /// config::ArgumentError unless bank_size_in_batches >= 1.
  static void check(int64_t bank_size_in_batches);
  /// config::ArgumentError unless `miner` (described as `miner_name`, e.g. "'hard_triplets'")
  /// anchors on given rows (not hard_cluster, whose anchors are label means, nor
  /// triplets_with_memory, whose anchors may be its own bank's rows).
  static void check_miner(const TripletMiner& miner, const std::string& miner_name);
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  /// Nothing: whether a batch has triplets depends on the bank, so mine() checks batch and bank
  /// together (TripletMiner::check_anchored_labels, on host copies of their labels).
  void check_labels(const torch::Tensor& labels) override;

 private:
  struct Batch {
    torch::Tensor embeddings;   ///< [B, D] detached, on the batch's device
    torch::Tensor labels;       ///< [B] on the batch's device
    torch::Tensor host_labels;  ///< [B] the same labels in host memory
  };
  int64_t bank_size_in_batches_;
  std::shared_ptr<TripletMiner> miner_;
  std::deque<Batch> bank_;
};

/// Pairs for pairwise training, as OML's PairsMiner: `hard` = the pairs (anchor, farthest
/// positive) and (anchor, nearest negative) of every item with a positive and a negative, each
/// unordered pair once with the smaller row first (positive pairs, then negative ones, each in
/// row order); otherwise every pair i < j of the batch.
class PairsMiner : public PairMiner {
 public:
  explicit PairsMiner(bool hard = true);
  PairSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;

 private:
  bool hard_;
};

/// PML's MultiSimilarityMiner (with its default distance, cosine): for an anchor i, with s its
/// similarities, the positives j with s_ij - epsilon < max over i's negatives, and the negatives j
/// with s_ij + epsilon > min over i's positives (for a distance: d_ij + epsilon > min over the
/// negatives, d_ij - epsilon < max over the positives).
struct MultiSimilarityMinerOptions {
  double epsilon = 0.1;
  DistanceOptions distance{DistanceKind::cosine};
};
/// config::ArgumentError naming the first bad field (epsilon >= 0).
void check_options(const MultiSimilarityMinerOptions& options);

class MultiSimilarityMiner : public PairSelectionMiner {
 public:
  explicit MultiSimilarityMiner(MultiSimilarityMinerOptions options = {});
  MinedPairs mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override;

 private:
  MultiSimilarityMinerOptions options_;
};

}  // namespace oml::losses
