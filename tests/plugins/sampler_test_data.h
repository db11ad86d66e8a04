#pragma once
// Random label sets for the sampler property tests, and checks shared by them.

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "oml/data/sampler.h"
#include "support/support.h"

namespace oml::test {

/// Label sets drawn with a fixed std::mt19937_64 (the tests are deterministic).
struct LabelSetShape {
  int64_t n_labels = 10;
  int64_t min_items = 2;
  int64_t max_items = 6;
  int64_t n_categories = 0;  ///< 0: no category column
};

/// Rows are shuffled, so labels are interleaved in dataframe order as in real data. Label l
/// gets category "c<l % n_categories>", so every category has labels when L >= #categories.
inline data::SamplerContext make_context(const LabelSetShape& shape, uint64_t data_seed, int64_t seed = 7) {
  std::mt19937_64 gen(data_seed);
  std::vector<int64_t> labels;
  for (int64_t l = 0; l < shape.n_labels; ++l) {
    const int64_t count =
        shape.min_items +
        static_cast<int64_t>(gen() % static_cast<uint64_t>(shape.max_items - shape.min_items + 1));
    labels.insert(labels.end(), count, l);
  }
  for (std::size_t i = labels.size(); i > 1; --i) std::swap(labels[i - 1], labels[gen() % i]);
  data::SamplerContext context;
  context.labels = labels;
  if (shape.n_categories > 0) {
    for (int64_t l : labels)
      context.categories.push_back(std::string("c").append(std::to_string(l % shape.n_categories)));
  }
  for (int64_t l = 0; l < shape.n_labels; ++l) context.label_values.push_back(1000 + l);
  context.seed = seed;
  context.source = "the train split of test.csv";
  return context;
}

inline std::map<int64_t, std::set<int64_t>> rows_by_label(const data::SamplerContext& context) {
  std::map<int64_t, std::set<int64_t>> out;
  for (std::size_t row = 0; row < context.labels.size(); ++row)
    out[context.labels[row]].insert(static_cast<int64_t>(row));
  return out;
}

/// Splits a batch into blocks of k and checks each block: one label, k items of that label,
/// distinct unless the label has fewer than k items (then every item of the label appears).
/// Returns the label of each block.
inline std::vector<int64_t> check_blocks(const data::SamplerContext& context, const data::Batch& batch,
                                         int64_t k) {
  const auto rows = rows_by_label(context);
  REQUIRE(batch.size() % static_cast<std::size_t>(k) == 0);
  std::vector<int64_t> block_labels;
  for (std::size_t start = 0; start < batch.size(); start += k) {
    const std::vector<int64_t> block(batch.begin() + start, batch.begin() + start + k);
    for (int64_t index : block) REQUIRE((index >= 0 && index < static_cast<int64_t>(context.labels.size())));
    const int64_t label = context.labels[block[0]];
    for (int64_t index : block) REQUIRE(context.labels[index] == label);
    const std::set<int64_t> distinct(block.begin(), block.end());
    const auto& label_rows = rows.at(label);
    if (static_cast<int64_t>(label_rows.size()) >= k) {
      REQUIRE(static_cast<int64_t>(distinct.size()) == k);
    } else {
      REQUIRE(distinct == label_rows);
    }
    block_labels.push_back(label);
  }
  return block_labels;
}

inline std::vector<int64_t> flatten(const std::vector<data::Batch>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace oml::test
