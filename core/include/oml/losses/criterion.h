#pragma once
// The loss interface: embeddings + labels of a batch -> a scalar loss and named log values.

#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

namespace oml::losses {

/// What a loss's build may need from the pipeline.
struct CriterionContext {
  int64_t embedding_size = 0;  ///< the extractor's feat_dim()
  int64_t num_classes = 0;     ///< number of train labels (labels are 0..num_classes-1)
  /// Category index of each train label (OML's `label2category`, the categories numbered in
  /// sorted order); empty when the train dataframe has no `category` column.
  std::vector<int64_t> label_categories{};
};

/// A loss value plus scalars the training log records per step (train.jsonl), e.g.
/// {"active_tri": 0.4, "pos_dist": 0.8, "neg_dist": 1.1} or {"accuracy": 0.93}. Each log value
/// is a detached tensor of one element, left where the loss computed it: the trainer reads them
/// when it writes the step's log line, not in the step (on CUDA a read makes the host wait for the
/// GPU). A number the loss knows on the host goes in as a CPU tensor (torch::scalar_tensor).
struct LossOutput {
  torch::Tensor loss;
  std::map<std::string, torch::Tensor> logs;
};

/// Contract for every loss:
/// - `forward(embeddings [B, D], labels [B] int64)` returns a scalar loss that autograd can
///   differentiate w.r.t. the embeddings and the loss's own parameters (registered on the
///   module: they are optimised with their own learning rate and saved in checkpoints).
/// - A batch the loss cannot use (one label only, no positive pairs, labels out of range)
///   throws DataError saying what the batch lacks — never returns NaN or an empty loss. The
///   checks that read the labels' values are check_labels(): forward() runs them itself when the
///   labels are on the CPU; for labels on a device the caller runs them on its host copy first
///   (the trainer does, on the sampler's labels), so that no step waits for the device.
/// - Log keys are stable across steps (train.jsonl columns).
/// - Under mixed precision (`precision: bf16 | 16`) the forward runs inside an autocast region
///   and the embeddings may be bfloat16 / float16. The built-in losses compute in float32
///   (a Float32Guard from oml/common/autocast.h and float32_input below) and so return a
///   float32 loss; a plugin loss should do the same.
class Criterion : public torch::nn::Module {
 public:
  virtual LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) = 0;
  /// The family name OML gives this loss (its `criterion_name`: "triplet", "arcface",
  /// "surrogate_precision"); empty for losses without one. The training loss is known as
  /// "<name>_loss" ("loss" when empty), and its epoch mean as "<name>_loss_epoch", the name an
  /// OML config's scheduling.monitor_metric uses.
  virtual std::string log_name() const { return {}; }
  /// The checks of a batch's labels [B] (CPU, integer) that need their values — a label range,
  /// a label with two items — throwing the DataError forward() would. The default checks none.
  virtual void check_labels(const torch::Tensor& labels) { (void)labels; }
};

/// "<log_name>_loss", or "loss" for a criterion without a log name (as OML's training_step).
std::string training_loss_name(const Criterion& criterion);

/// The profiler scope (RecordFunction, user scope) around every read of a batch's label values.
inline constexpr const char* kLabelCheckScope = "oml::check_labels";

/// Runs `criterion.check_labels(labels)` when `labels` are on the CPU (reading them costs
/// nothing there); labels on a device were checked on the host by the caller (the contract above).
void check_labels_on_host(Criterion& criterion, const torch::Tensor& labels);

/// [B, classes] of `dtype`: 1 at (i, labels[i]), 0 elsewhere. torch::one_hot without its checks,
/// which on the CPU read the labels' minimum and maximum back; the labels of a step were checked
/// on the host already (check_labels), and this formulation reads nothing on any device.
torch::Tensor one_hot(const torch::Tensor& labels, int64_t classes, c10::ScalarType dtype);

/// Euclidean distances between all rows of `a` and all rows of `b` ([Na, Nb]), in O(Na x Nb)
/// memory; differentiable, with a zero (not NaN) gradient where a distance is 0.
torch::Tensor pairwise_distances(const torch::Tensor& a, const torch::Tensor& b);

/// `embeddings` as float32 when autocast made them a 16-bit float type (bfloat16, float16);
/// other dtypes unchanged. Differentiable (the cast's gradient flows back in the input's dtype).
torch::Tensor float32_input(const torch::Tensor& embeddings);

/// Checks the shapes of a batch: embeddings [B, D] with B >= 1, labels [B] integer.
void check_batch(const torch::Tensor& embeddings, const torch::Tensor& labels, const std::string& who);

/// DataError naming `who` unless some item of the batch shares its label with another (a
/// positive pair exists); reads the labels' values (for a Criterion::check_labels).
void require_positive_pair(const torch::Tensor& labels, const std::string& who);

}  // namespace oml::losses
