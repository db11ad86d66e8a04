#include "oml/losses/criterion.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "oml/common/error.h"

namespace oml::losses {

torch::Tensor pairwise_distances(const torch::Tensor& a, const torch::Tensor& b) {
  // |a|^2 + |b|^2 - 2 a.b: O(Na x Nb) memory (a broadcast difference would need Na x Nb x D).
  const auto squared =
      (a.pow(2).sum(1, true) + b.pow(2).sum(1).unsqueeze(0) - 2 * torch::mm(a, b.t())).clamp_min(0);
  // sqrt has an infinite derivative at 0: keep the gradient finite (zero) there.
  const auto positive = squared > 1e-12;
  const auto safe = torch::where(positive, squared, torch::ones_like(squared));
  return torch::where(positive, safe.sqrt(), torch::zeros_like(squared));
}

torch::Tensor float32_input(const torch::Tensor& embeddings) {
  const auto type = embeddings.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? embeddings.to(torch::kFloat) : embeddings;
}

void check_batch(const torch::Tensor& embeddings, const torch::Tensor& labels, const std::string& who) {
  OML_CHECK(embeddings.dim() == 2 && embeddings.size(0) >= 1, DataError, who,
            ": expected embeddings [B, D] with B >= 1, got ", embeddings.sizes());
  OML_CHECK(labels.dim() == 1 && labels.size(0) == embeddings.size(0), DataError, who, ": expected labels [",
            embeddings.size(0), "], got ", labels.sizes());
  OML_CHECK(!labels.is_floating_point(), DataError, who, ": labels must be integers, got ",
            labels.scalar_type());
}

void require_positive_pair(const torch::Tensor& labels, const std::string& who) {
  // The diagonal is B of the equal pairs; any more is a pair of two items.
  const bool paired = (labels.unsqueeze(0) == labels.unsqueeze(1)).sum().item<int64_t>() > labels.size(0);
  OML_CHECK(paired, DataError, who, ": no item of the batch (", labels.size(0),
            " items) has another item with its label — use a sampler such as 'balance'");
}

std::string training_loss_name(const Criterion& criterion) {
  const std::string name = criterion.log_name();
  return name.empty() ? "loss" : name + "_loss";
}

torch::Tensor one_hot(const torch::Tensor& labels, int64_t classes, c10::ScalarType dtype) {
  const auto index = labels.to(torch::kLong).unsqueeze(1);
  return torch::zeros({labels.size(0), classes}, labels.options().dtype(dtype)).scatter_(1, index, 1);
}

void check_labels_on_host(Criterion& criterion, const torch::Tensor& labels) {
  if (!labels.device().is_cpu()) return;
  // Named in profiles, and what the step-sync tests tell apart from a read inside the step.
  RECORD_USER_SCOPE(kLabelCheckScope);
  criterion.check_labels(labels);
}

}  // namespace oml::losses
