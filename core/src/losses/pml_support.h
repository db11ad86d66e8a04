#pragma once
// Internal to the losses ported from pytorch-metric-learning (pair_losses.cpp, proxy_losses.cpp,
// margin_softmax_losses.cpp): the pieces of PML's machinery they share, written once so that every
// loss reduces, masks and normalises the way PML does.

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace oml::losses::detail {

/// L2-normalised rows (PML's distances normalise with F.normalize(p=2, dim=1), eps 1e-12).
torch::Tensor unit_rows(const torch::Tensor& x);

/// PML's lmu.logsumexp(x, keep_mask, add_one) along dim 1 ([N, M] -> [N]): log(sum over the
/// mask of exp(x)), with a 1 added inside the log when `add_one`; 0 for a row with an empty mask.
torch::Tensor masked_logsumexp(const torch::Tensor& x, const torch::Tensor& mask, bool add_one);

/// PML's AvgNonZeroReducer: the mean of the positive values, 0 (attached to the graph through
/// `values`, as PML's zero loss is) when there are none. A masked sum over a count: it reads
/// nothing back, so the values a loss leaves out (pairs of the other kind) are passed as 0.
torch::Tensor mean_of_positive(const torch::Tensor& values);

/// The checks of num_classes and embedding_size shared by the losses with class weights, for
/// their check_options: each >= 2 / > 0, or 0 (filled in from the run by the registry's build).
/// `who` is "loss '<name>'".
void check_class_sizes(int64_t num_classes, int64_t embedding_size, const std::string& who);

/// In a constructor: UsageError unless both sizes are set (the build fills the zeros in).
void require_class_sizes(int64_t num_classes, int64_t embedding_size, const std::string& name);

/// The checks of a batch for a loss with one weight row/column per class: `embeddings` [B, D]
/// float32 with D == embedding_size, integer labels [B] in [0, num_classes) (their range only
/// when they are on the CPU: see Criterion::check_labels). DataError otherwise, naming `who` and
/// what does not fit.
void check_class_batch(const torch::Tensor& embeddings, const torch::Tensor& labels, int64_t embedding_size,
                       int64_t num_classes, const std::string& who);

/// DataError naming `who` unless every label is in [0, num_classes); reads the labels' values
/// (a Criterion::check_labels).
void check_label_range(const torch::Tensor& labels, int64_t num_classes, const std::string& who);

/// The fraction of rows whose largest score is their label's ([B, C] scores, [B] labels), a
/// double tensor on their device; a log value.
torch::Tensor accuracy(const torch::Tensor& scores, const torch::Tensor& labels);

}  // namespace oml::losses::detail
