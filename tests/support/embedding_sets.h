#pragma once
// Embedding sets the metric tests build again and again.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "oml/metrics/embedding_set.h"

namespace oml::test {

/// Every row is a query and a gallery item (a query never retrieves itself).
inline metrics::EmbeddingSet every_item_both(const torch::Tensor& embeddings,
                                             const std::vector<int64_t>& labels) {
  metrics::EmbeddingSet set;
  set.embeddings = embeddings;
  set.labels = labels;
  set.is_query.assign(labels.size(), 1);
  set.is_gallery.assign(labels.size(), 1);
  return set;
}

}  // namespace oml::test
