#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/losses/surrogate_precision.h"

#include "oml/config/argument_error.h"

namespace oml::losses {
namespace {

using torch::indexing::Slice;

// sigmoid((d(i,j) - d(i,l)) / t) for the anchor rows [begin, end): [c, B (j), B (l)], every l
// (the anchor itself and j included, as OML's).
torch::Tensor comparisons(const torch::Tensor& d, int64_t begin, int64_t end, double t) {
  const auto rows = d.index({Slice(begin, end)});
  return torch::sigmoid((rows.unsqueeze(2) - rows.unsqueeze(1)) / t);
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
      ranks.index_put_({Slice(begin, end)}, comparisons(d, begin, end, t).sum(2));
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
  config::check_argument(o.reduction == "mean" || o.reduction == "sum", who, "reduction",
                         "reduction must be 'mean' or 'sum', got '", o.reduction, "'");
}

SurrogatePrecisionImpl::SurrogatePrecisionImpl(SurrogatePrecisionOptions options) : options_(options) {
  check_options(options_);
}

LossOutput SurrogatePrecisionImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, "surrogate_precision");
  // torch.cdist, as OML's pairwise_dist: the rank compares d(i, j) with d(i, i), whose value and
  // gradient are then OML's (exactly 0 for batches of up to 25 items).
  const auto d = at::cdist(embeddings, embeddings);
  // OML's k + 1: every item is its own nearest neighbour and its own positive.
  const auto k = static_cast<double>(options_.k + 1);
  const auto ranks = smooth_ranks(d, options_.temperature2, options_.chunk_size);
  const auto hits = torch::sigmoid((k - ranks) / options_.temperature1);
  const auto same = (labels.unsqueeze(0) == labels.unsqueeze(1)).to(hits.scalar_type());
  const auto precision = (hits * same).sum(1) / same.sum(1).clamp_max(k);
  LossOutput out;
  out.loss = 1 - (options_.reduction == "sum" ? precision.sum() : precision.mean());
  out.logs["precision"] = precision.mean().detach();
  return out;
}

}  // namespace oml::losses
