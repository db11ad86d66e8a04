#pragma once
// The validation rows that metrics are computed on: embeddings with their labels, query and
// gallery flags, and optional categories and sequences, in dataset order.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace oml::metrics {

struct EmbeddingSet {
  at::Tensor embeddings;                 ///< [N, D] float32
  std::vector<int64_t> labels;           ///< N
  std::vector<uint8_t> is_query;         ///< N, 0/1
  std::vector<uint8_t> is_gallery;       ///< N, 0/1
  std::vector<std::string> categories;   ///< N or empty (no per-category metrics)
  std::vector<std::string> sequences;    ///< N or empty; "" = no sequence for that row
  std::vector<int64_t> dataset_indices;  ///< N or empty (= 0 .. N-1): names rows in messages
};

}  // namespace oml::metrics
