#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/losses/surrogate_precision.h"

#include "oml/config/argument_error.h"

namespace oml::losses {
namespace {

using torch::indexing::Slice;

// sigmoid((d(i,j) - d(i,l)) / t) for the anchors rows [begin, end): [c, B (j), B (l)], with the
// comparison against the anchor itself (l == i) removed (sigmoid(-inf) = 0).
torch::Tensor comparisons(const torch::Tensor& d, int64_t begin, int64_t end, double t) {
  const auto rows = d.index({Slice(begin, end)});
  auto diff = (rows.unsqueeze(2) - rows.unsqueeze(1)) / t;
  const auto anchor =
      torch::arange(begin, end, torch::TensorOptions().dtype(torch::kLong).device(d.device()));
  const auto is_anchor =
      (torch::arange(d.size(1), anchor.options()).unsqueeze(0) == anchor.unsqueeze(1));  // [c, l]
  return torch::sigmoid(diff.masked_fill(is_anchor.unsqueeze(1), -std::numeric_limits<double>::infinity()));
}

// Ranks as a custom autograd function: autograd through the chunks would keep every
// [c, B, B] block alive until backward, i.e. B^3 memory; this recomputes them instead.
struct SmoothRanks : torch::autograd::Function<SmoothRanks> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor d, double t,
                               int64_t chunk) {
    ctx->save_for_backward({d});
    ctx->saved_data["t"] = t;
    ctx->saved_data["chunk"] = chunk;
    auto ranks = torch::empty_like(d);
    for (int64_t begin = 0; begin < d.size(0); begin += chunk) {
      const int64_t end = std::min(begin + chunk, d.size(0));
      // The term l == j is sigmoid(0) = 1/2: an item does not outrank itself.
      ranks.index_put_({Slice(begin, end)}, 0.5 + comparisons(d, begin, end, t).sum(2));
    }
    return ranks;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto d = ctx->get_saved_variables()[0];
    const double t = ctx->saved_data["t"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const auto& g = grads[0];
    auto gd = torch::zeros_like(d);
    for (int64_t begin = 0; begin < d.size(0); begin += chunk) {
      const int64_t end = std::min(begin + chunk, d.size(0));
      const auto s = comparisons(d, begin, end, t);
      // d/dx sigmoid(x / t) = s (1 - s) / t; + for d(i,j), - for d(i,l).
      const auto w = g.index({Slice(begin, end)}).unsqueeze(2) * s * (1 - s) / t;
      gd.index_put_({Slice(begin, end)}, w.sum(2) - w.sum(1));
    }
    return {gd, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor smooth_ranks(const torch::Tensor& distances, double temperature, int64_t chunk_size) {
  return SmoothRanks::apply(distances, temperature, chunk_size);
}

void check_options(const SurrogatePrecisionOptions& o) {
  const std::string who = "loss 'surrogate_precision'";
  config::check_argument(o.k >= 1, who, "k", "k must be >= 1, got ", o.k);
  config::check_argument(o.temperature1 > 0, who, "temperature1", "temperature1 must be > 0, got ",
                         o.temperature1);
  config::check_argument(o.temperature2 > 0, who, "temperature2", "temperature2 must be > 0, got ",
                         o.temperature2);
  config::check_argument(o.chunk_size >= 1, who, "chunk_size", "chunk_size must be >= 1, got ", o.chunk_size);
}

SurrogatePrecisionImpl::SurrogatePrecisionImpl(SurrogatePrecisionOptions options) : options_(options) {
  check_options(options_);
}

LossOutput SurrogatePrecisionImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, "surrogate_precision");
  check_labels_on_host(*this, labels);
  const auto d = pairwise_distances(embeddings, embeddings);
  const auto ranks = smooth_ranks(d, options_.temperature1, options_.chunk_size);
  const auto hits = torch::sigmoid((static_cast<double>(options_.k) + 0.5 - ranks) / options_.temperature2);
  const auto eye =
      torch::eye(labels.size(0), torch::TensorOptions().dtype(torch::kBool).device(labels.device()));
  const auto positive = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~eye;
  const auto n_pos = positive.sum(1);
  // The mean over the anchors with a positive, as a masked sum over their count (check_labels
  // made sure there is one): nothing is read back.
  const auto anchors = (n_pos > 0).to(hits.scalar_type());
  const auto per_anchor =
      (hits * positive.to(hits.scalar_type())).sum(1) / n_pos.clamp(1, options_.k).to(hits.scalar_type());
  const auto precision = (per_anchor * anchors).sum() / anchors.sum().clamp_min(1);
  LossOutput out;
  out.loss = 1 - precision;
  out.logs["precision"] = precision.detach();
  return out;
}

void SurrogatePrecisionImpl::check_labels(const torch::Tensor& labels) {
  require_positive_pair(labels, "surrogate_precision");
}

}  // namespace oml::losses
