#pragma once
// pytorch-metric-learning's proxy losses, equal to PML 2.8's defaults (docs/models.md#losses-criterion):
//
//   criterion: {name: proxy_anchor, args: {margin: 0.1, alpha: 32}}
//   criterion: {name: proxy_nca, args: {softmax_scale: 1}}
//   criterion: {name: soft_triple, args: {centers_per_class: 10, la: 20, gamma: 0.1, margin: 0.01}}
//
// Each learns proxies (class centres) of its own: parameters of the loss module, under PML's
// names and shapes (so a PML loss's state_dict loads as it is), optimised with `loss_lr` and kept
// in checkpoints. num_classes and embedding_size default to 0: the number of train labels and the
// extractor's embedding size. Labels must be in [0, num_classes). They compute in float32 under
// autocast, like the other built-in losses.

#include "oml/losses/criterion.h"
#include "oml/losses/distance.h"

namespace oml::losses {

/// PML's ProxyAnchorLoss with its default distance, CosineSimilarity, and reducer, DivisorReducer:
/// with s(x, p) the cosine similarity of an embedding and a proxy, X_p+ the batch items of proxy
/// p's class and X_p- the others,
///   pos_loss = 1/|P+| * sum over the proxies P+ with an item in the batch of
///              log(1 + sum_{x in X_p+} exp(-alpha (s(x, p) - margin)))
///   neg_loss = 1/num_classes * sum over all proxies of log(1 + sum_{x in X_p-} exp(alpha (s(x, p) +
///   margin)))
/// loss = pos_loss + neg_loss. Logs: `pos_loss`, `neg_loss`.
/// Parameter `proxies` [num_classes, embedding_size], initialised as PML (Kaiming normal, fan out).
struct ProxyAnchorOptions {
  int64_t num_classes = 0;                         ///< 0: the number of train labels
  int64_t embedding_size = 0;                      ///< 0: the extractor's embedding size
  double margin = 0.1;                             ///< >= 0
  double alpha = 32.0;                             ///< > 0
  DistanceOptions distance{DistanceKind::cosine};  ///< any; with a distance PML's margin() turns the terms
};

/// config::ArgumentError naming the first bad field (num_classes and embedding_size only when set).
void check_options(const ProxyAnchorOptions& options);

class ProxyAnchorLossImpl : public Criterion {
 public:
  explicit ProxyAnchorLossImpl(ProxyAnchorOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< labels in [0, num_classes)

  torch::Tensor proxies;

 private:
  ProxyAnchorOptions options_;
};
TORCH_MODULE(ProxyAnchorLoss);

/// PML's ProxyNCALoss with NCALoss's default distance, LpDistance(power=2) of L2-normalised
/// vectors: with d2(x, p) the squared Euclidean distance of the normalised embedding and proxy,
///   loss_x = -log softmax over the proxies p of (-softmax_scale * d2(x, p)) at x's class,
/// averaged over the batch (PML's MeanReducer). Like PML, an item whose probability underflows to
/// 0 is left out of the mean; should every item underflow (softmax_scale in the hundreds) the loss
/// is 0 where PML's is NaN. Logs: `accuracy` (nearest proxy is the item's class).
/// Parameter `proxies` [num_classes, embedding_size], initialised as PML (standard normal).
struct ProxyNCAOptions {
  int64_t num_classes = 0;     ///< 0: the number of train labels
  int64_t embedding_size = 0;  ///< 0: the extractor's embedding size
  double softmax_scale = 1.0;  ///< > 0
  DistanceOptions distance{
      DistanceKind::squared_euclidean};  ///< any; a similarity enters as is, a distance negated
};

/// config::ArgumentError naming the first bad field (num_classes and embedding_size only when set).
void check_options(const ProxyNCAOptions& options);

class ProxyNCALossImpl : public Criterion {
 public:
  explicit ProxyNCALossImpl(ProxyNCAOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< labels in [0, num_classes)

  torch::Tensor proxies;

 private:
  ProxyNCAOptions options_;
};
TORCH_MODULE(ProxyNCALoss);

/// PML's SoftTripleLoss with CosineSimilarity: each class has centers_per_class centres; with
/// s_c^k the cosine similarity of an embedding and centre k of class c,
///   S_c = sum_k softmax_k(s_c^k / gamma) * s_c^k,
///   loss_x = cross-entropy of la * (S_c - margin [c = x's class]) against x's class,
/// averaged over the batch (MeanReducer). As in PML, without the original paper's regulariser
/// that merges similar centres. Logs: `accuracy` (argmax of S_c).
/// Parameter `fc` [embedding_size, num_classes * centers_per_class] (class c's centres are columns
/// c * centers_per_class ...), initialised as PML (Kaiming uniform, a = sqrt(5)).
struct SoftTripleOptions {
  int64_t num_classes = 0;         ///< 0: the number of train labels
  int64_t embedding_size = 0;      ///< 0: the extractor's embedding size
  int64_t centers_per_class = 10;  ///< >= 1
  double la = 20.0;                ///< scale of the class similarities (lambda), > 0
  double gamma = 0.1;              ///< temperature of the softmax over a class's centres, > 0
  double margin = 0.01;            ///< subtracted from the true class's similarity (delta), >= 0
  DistanceOptions distance{DistanceKind::cosine};  ///< cosine or dot (PML asserts a similarity)
};

/// config::ArgumentError naming the first bad field (num_classes and embedding_size only when set).
void check_options(const SoftTripleOptions& options);

class SoftTripleLossImpl : public Criterion {
 public:
  explicit SoftTripleLossImpl(SoftTripleOptions options);
  LossOutput forward(const torch::Tensor& embeddings, const torch::Tensor& labels) override;
  void check_labels(const torch::Tensor& labels) override;  ///< labels in [0, num_classes)

  torch::Tensor fc;

 private:
  SoftTripleOptions options_;
};
TORCH_MODULE(SoftTripleLoss);

}  // namespace oml::losses
