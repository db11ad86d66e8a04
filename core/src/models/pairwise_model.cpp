#include "oml/models/pairwise_model.h"

#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"

namespace oml::models {
namespace {

void check_pair(const torch::Tensor& x1, const torch::Tensor& x2, const char* model) {
  OML_CHECK(x1.sizes() == x2.sizes(), DataError, model,
            ": both sides of the pairs must have the same shape, got ", x1.sizes(), " and ", x2.sizes());
}

}  // namespace

void LinearSiameseImpl::check(int64_t feat_dim) {
  config::check_argument(feat_dim > 0, "pairwise model 'linear_siamese'", "feat_dim",
                         "feat_dim must be > 0, got ", feat_dim);
}

LinearSiameseImpl::LinearSiameseImpl(int64_t feat_dim, bool identity_init) {
  check(feat_dim);
  auto init = identity_init ? torch::eye(feat_dim)
                            : torch::randn({feat_dim, feat_dim}) / std::sqrt(static_cast<double>(feat_dim));
  proj_ = register_parameter("proj", init);
  bias_ = register_parameter("bias", torch::zeros({1}));
}

torch::Tensor LinearSiameseImpl::forward(torch::Tensor x1, torch::Tensor x2) {
  check_pair(x1, x2, "linear_siamese");
  OML_CHECK(x1.dim() == 2 && x1.size(1) == proj_.size(0), DataError, "linear_siamese expects embeddings [B, ",
            proj_.size(0), "], got ", x1.sizes());
  return torch::matmul(x1 - x2, proj_.t()).norm(2, 1) + bias_;
}

TrivialDistanceSiameseImpl::TrivialDistanceSiameseImpl(std::shared_ptr<Extractor> extractor)
    : extractor_(std::move(extractor)) {
  register_module("extractor", extractor_);
  bias_ = register_parameter("bias", torch::zeros({1}));
}

torch::Tensor TrivialDistanceSiameseImpl::forward(torch::Tensor x1, torch::Tensor x2) {
  check_pair(x1, x2, "trivial_distance_siamese");
  const auto e = extractor_->forward(torch::cat({x1, x2}, 0));
  const int64_t n = x1.size(0);
  return (e.slice(0, 0, n) - e.slice(0, n)).norm(2, 1) + bias_;
}

void ConcatSiameseImpl::check(const std::vector<int64_t>& mlp_hidden_dims) {
  for (std::size_t i = 0; i < mlp_hidden_dims.size(); ++i) {
    config::check_argument(mlp_hidden_dims[i] > 0, "pairwise model 'concat_siamese'", "mlp_hidden_dims",
                           "mlp_hidden_dims[", i, "] must be > 0, got ", mlp_hidden_dims[i]);
  }
}

ConcatSiameseImpl::ConcatSiameseImpl(std::shared_ptr<Extractor> extractor,
                                     std::vector<int64_t> mlp_hidden_dims, bool use_tta_swap)
    : extractor_(std::move(extractor)), use_tta_swap_(use_tta_swap) {
  namespace nn = torch::nn;
  check(mlp_hidden_dims);
  register_module("extractor", extractor_);
  // OML's head: torchvision.ops.MLP(feat_dim, [*hidden, 1], activation_layer=Sigmoid, dropout=0.5)
  // with the last Linear's bias and the last Dropout removed; the indices of its layers are the
  // keys of OML's state dicts.
  head_ = nn::Sequential();
  int64_t in = extractor_->feat_dim();
  for (std::size_t i = 0; i < mlp_hidden_dims.size(); ++i) {
    head_->push_back(nn::Linear(in, mlp_hidden_dims[i]));
    head_->push_back(nn::Sigmoid());
    head_->push_back(nn::Dropout(0.5));
    in = mlp_hidden_dims[i];
  }
  head_->push_back(nn::Linear(nn::LinearOptions(in, 1).bias(false)));
  register_module("head", head_);
}

torch::Tensor ConcatSiameseImpl::forward(torch::Tensor x1, torch::Tensor x2) {
  check_pair(x1, x2, "concat_siamese");
  OML_CHECK(x1.dim() == 4, DataError, "concat_siamese expects images [B, C, H, W], got ", x1.sizes());
  const torch::Tensor stacked = torch::cat({x1, x2}, /*dim=*/2);
  torch::Tensor embedding;
  if (backbone_frozen_) {
    const torch::NoGradGuard no_grad;
    embedding = extractor_->forward(stacked);
  } else {
    embedding = extractor_->forward(stacked);
  }
  return head_->forward(embedding).squeeze(1);
}

torch::Tensor ConcatSiameseImpl::predict(torch::Tensor x1, torch::Tensor x2) {
  auto score = torch::sigmoid(forward(x1, x2));
  if (use_tta_swap_) score = 0.5 * (score + torch::sigmoid(forward(x2, x1)));
  return score;
}

}  // namespace oml::models
