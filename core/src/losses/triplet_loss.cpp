#include <torch/torch.h>

#include <array>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/losses/triplet_loss.h"

namespace oml::losses {

torch::Tensor triplet_losses_of_distances(const torch::Tensor& d_ap, const torch::Tensor& d_an,
                                          std::optional<double> margin) {
  const auto gap = d_ap - d_an;
  // softplus(x) = log(1 + exp(x)) without overflow for large x.
  return margin ? torch::relu(gap + *margin) : torch::nn::functional::softplus(gap);
}

torch::Tensor triplet_losses(const torch::Tensor& anchors, const torch::Tensor& positives,
                             const torch::Tensor& negatives, std::optional<double> margin) {
  return triplet_losses_of_distances((anchors - positives).norm(2, 1), (anchors - negatives).norm(2, 1),
                                     margin);
}

std::pair<torch::Tensor, torch::Tensor> triplet_distances(const TripletSet& t) {
  const int64_t rows = t.pool.size(0);
  if (2 * t.size() > rows * rows) {
    // compute_mode 2 ("donot_use_mm_for_euclid_dist"): each entry the norm of a difference, as
    // below, not |x|^2 + |y|^2 - 2 x.y, which loses digits for near points and has no finite
    // gradient at 0.
    const auto d = at::cdist(t.pool, t.pool, 2.0, /*compute_mode=*/2).reshape(-1);
    const auto base = t.anchors * rows;
    return {d.index_select(0, base + t.positives), d.index_select(0, base + t.negatives)};
  }
  const auto a = t.pool.index_select(0, t.anchors);
  return {(a - t.pool.index_select(0, t.positives)).norm(2, 1),
          (a - t.pool.index_select(0, t.negatives)).norm(2, 1)};
}

void check_options(const TripletOptions& o, const std::string& loss) {
  const std::string who = "loss '" + loss + "'";
  config::check_argument(o.reduction == "mean" || o.reduction == "sum", who, "reduction",
                         "reduction must be 'mean' or 'sum', got '", o.reduction, "'");
  config::check_argument(!o.margin || *o.margin >= 0, who, "margin",
                         "margin must be >= 0 (or null for the soft margin), got ", o.margin.value_or(0.0));
}

TripletLossWithMinerImpl::TripletLossWithMinerImpl(std::shared_ptr<TripletMiner> miner,
                                                   TripletOptions options)
    : miner_(std::move(miner)), options_(std::move(options)) {
  OML_ASSERT(miner_ != nullptr);
  check_options(options_);
}

void TripletLossWithMinerImpl::check_labels(const torch::Tensor& labels) { miner_->check_labels(labels); }

LossOutput TripletLossWithMinerImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, "triplet_with_miner");
  check_labels_on_host(*this, labels);
  const TripletSet t = miner_->mine(embeddings, labels);
  const auto [d_ap, d_an] = triplet_distances(t);
  const auto losses = triplet_losses_of_distances(d_ap, d_an, options_.margin);
  // A miner's placeholders (TripletSet::valid) weigh 0: sums and means over the valid triplets,
  // in each value's dtype, read from nothing; without placeholders, plain sums and means.
  const auto weight = t.valid.defined() ? t.valid.to(losses.scalar_type()) : torch::Tensor();
  const auto count = weight.defined() ? weight.sum() : torch::Tensor();
  const auto sum_of = [&](const torch::Tensor& values) {
    return weight.defined() ? (values * weight.to(values.scalar_type())).sum() : values.sum();
  };
  const auto mean_of = [&](const torch::Tensor& values) {
    return weight.defined() ? sum_of(values) / count.to(values.scalar_type()) : values.mean();
  };
  LossOutput out;
  out.loss = options_.reduction == "mean" ? mean_of(losses) : sum_of(losses);
  torch::NoGradGuard no_grad;
  out.logs["active_tri"] = mean_of((losses > 0).to(torch::kDouble));
  out.logs["pos_dist"] = mean_of(d_ap.detach());
  out.logs["neg_dist"] = mean_of(d_an.detach());
  out.logs["n_triplets"] = weight.defined()
                               ? count.to(torch::kDouble)
                               : torch::scalar_tensor(static_cast<double>(t.size()), torch::kDouble);
  if (t.from_batch.defined()) {  // OML's logs of triplets from the batch and with a bank row
    const auto active = (losses > 0).to(torch::kDouble);
    for (const auto& [kind, mask] : {std::pair{"orig", t.from_batch}, std::pair{"bank", ~t.from_batch}}) {
      const auto w = mask.to(torch::kDouble);
      const auto mean_over = [&](const torch::Tensor& v) {
        return (v.to(torch::kDouble) * w).sum() / w.sum();
      };
      out.logs[std::string(kind) + "_active_tri"] = mean_over(active);
      out.logs[std::string("pos_dist_") + kind] = mean_over(d_ap.detach());
      out.logs[std::string("neg_dist_") + kind] = mean_over(d_an.detach());
    }
  }
  return out;
}

namespace {

// Row indices of a batch's n anchors, positives and negatives in `layout`.
std::array<torch::Tensor, 3> triplet_rows(TripletLayout layout, int64_t n, torch::Device device) {
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(device);
  if (layout == TripletLayout::blocks)
    return {torch::arange(0, n, options), torch::arange(n, 2 * n, options),
            torch::arange(2 * n, 3 * n, options)};
  return {torch::arange(0, 3 * n, 3, options), torch::arange(1, 3 * n, 3, options),
          torch::arange(2, 3 * n, 3, options)};
}

}  // namespace

TripletLossImpl::TripletLossImpl(TripletLayout layout, TripletOptions options)
    : layout_(layout),
      options_(std::move(options)),
      name_(layout == TripletLayout::blocks ? "triplet" : "triplet_plain") {
  check_options(options_, name_);
}

LossOutput TripletLossImpl::forward(const torch::Tensor& input, const torch::Tensor& labels) {
  const Float32Guard float32;  // the loss in float32 whatever autocast the extractor ran under
  const torch::Tensor embeddings = float32_input(input);
  check_batch(embeddings, labels, name_);
  const int64_t n = embeddings.size(0) / 3;
  OML_CHECK(embeddings.size(0) % 3 == 0, DataError, name_,
            ": expected a batch of triplets (a size divisible by 3), got ", embeddings.size(0), " items");
  check_labels_on_host(*this, labels);
  const auto [a_rows, p_rows, n_rows] = triplet_rows(layout_, n, embeddings.device());
  const auto a = embeddings.index_select(0, a_rows);
  const auto p = embeddings.index_select(0, p_rows);
  const auto ng = embeddings.index_select(0, n_rows);
  const auto losses = triplet_losses(a, p, ng, options_.margin);
  LossOutput out;
  out.loss = options_.reduction == "mean" ? losses.mean() : losses.sum();
  torch::NoGradGuard no_grad;
  out.logs["active_tri"] = (losses > 0).to(torch::kDouble).mean();
  out.logs["pos_dist"] = (a - p).norm(2, 1).mean();
  out.logs["neg_dist"] = (a - ng).norm(2, 1).mean();
  return out;
}

void TripletLossImpl::check_labels(const torch::Tensor& labels) {
  const int64_t n = labels.size(0) / 3;  // a size not divisible by 3 is forward()'s error
  const auto [a_rows, p_rows, n_rows] = triplet_rows(layout_, n, labels.device());
  const auto la = labels.index_select(0, a_rows);
  const auto lp = labels.index_select(0, p_rows);
  const auto ln = labels.index_select(0, n_rows);
  const auto bad = ((la != lp) | (la == ln)).nonzero();
  if (bad.size(0) == 0) return;
  const int64_t i = bad[0][0].item<int64_t>();
  const std::string where = layout_ == TripletLayout::blocks
                                ? "rows " + std::to_string(i) + ", " + std::to_string(n + i) + ", " +
                                      std::to_string(2 * n + i) + " of [anchors; positives; negatives]"
                                : "rows " + std::to_string(3 * i) + ".." + std::to_string(3 * i + 2);
  throw DataError(::oml::detail::concat(
      name_, ": the batch is not made of triplets: triplet ", i, " (", where, ") has labels ",
      la[i].item<int64_t>(), ", ", lp[i].item<int64_t>(), ", ", ln[i].item<int64_t>(),
      "; anchor and positive must share a label that the negative lacks (a P x K sampler's batch "
      "is not triplets: use triplet_with_miner)"));
}

}  // namespace oml::losses
