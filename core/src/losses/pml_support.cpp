#include "pml_support.h"

#include <ATen/record_function.h>

#include <limits>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/losses/criterion.h"

namespace oml::losses::detail {

torch::Tensor unit_rows(const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  return F::normalize(x, F::NormalizeFuncOptions().p(2).dim(1));
}

torch::Tensor masked_logsumexp(const torch::Tensor& x, const torch::Tensor& mask, bool add_one) {
  // PML fills with the dtype's lowest finite value (c_f.neg_inf), not -inf: an empty row stays finite.
  auto masked = x.masked_fill(~mask, std::numeric_limits<float>::lowest());
  if (add_one) masked = torch::cat({masked, torch::zeros({x.size(0), 1}, x.options())}, 1);
  return torch::logsumexp(masked, 1).masked_fill(~mask.any(1), 0);
}

torch::Tensor mean_of_positive(const torch::Tensor& values) {
  const auto kept = (values > 0).to(values.scalar_type());
  return (values * kept).sum() / kept.sum().clamp_min(1);
}

void check_class_sizes(int64_t num_classes, int64_t embedding_size, const std::string& who) {
  config::check_argument(num_classes == 0 || num_classes >= 2, who, "num_classes",
                         "num_classes must be >= 2 (or 0: the number of train labels), got ", num_classes);
  config::check_argument(embedding_size >= 0, who, "embedding_size",
                         "embedding_size must be > 0 (or 0: the extractor's size), got ", embedding_size);
}

void require_class_sizes(int64_t num_classes, int64_t embedding_size, const std::string& name) {
  OML_CHECK(num_classes > 0 && embedding_size > 0, UsageError, name,
            ": num_classes and embedding_size must be set, got ", num_classes, " and ", embedding_size);
}

void check_class_batch(const torch::Tensor& embeddings, const torch::Tensor& labels, int64_t embedding_size,
                       int64_t num_classes, const std::string& who) {
  check_batch(embeddings, labels, who);
  OML_CHECK(embeddings.size(1) == embedding_size, DataError, who, ": expected embeddings of size ",
            embedding_size, " (embedding_size), got ", embeddings.size(1));
  if (labels.device().is_cpu()) check_label_range(labels, num_classes, who);
}

void check_label_range(const torch::Tensor& labels, int64_t num_classes, const std::string& who) {
  RECORD_USER_SCOPE(kLabelCheckScope);  // a read of the labels: on the host, before the step
  const int64_t lo = labels.min().item<int64_t>(), hi = labels.max().item<int64_t>();
  OML_CHECK(lo >= 0 && hi < num_classes, DataError, who, ": labels must be in [0, ", num_classes, "), got ",
            lo, "..", hi, " (num_classes too small for the train labels?)");
}

torch::Tensor accuracy(const torch::Tensor& scores, const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  return (scores.argmax(1) == labels).to(torch::kDouble).mean();
}

}  // namespace oml::losses::detail
