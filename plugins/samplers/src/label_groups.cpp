#include "oml/samplers/label_groups.h"

#include <algorithm>
#include <map>

namespace oml::samplers {

LabelGroups LabelGroups::build(const data::SamplerContext& context, const std::string& sampler) {
  OML_CHECK(!context.labels.empty(), DataError, "sampler '", sampler, "': ", context.source,
            " has no rows to sample");
  LabelGroups groups;
  const auto n = static_cast<int64_t>(context.labels.size());
  const auto [min_it, max_it] = std::minmax_element(context.labels.begin(), context.labels.end());
  std::vector<int64_t> group_of_row(context.labels.size());
  if (*min_it >= 0 && *max_it < 2 * n) {
    // Labels remapped to 0..L-1 (the pipelines' case): a direct table, O(n).
    std::vector<int64_t> group_of_label(*max_it + 1, -1);
    for (int64_t label : context.labels) group_of_label[label] = 0;
    for (int64_t label = 0; label <= *max_it; ++label) {
      if (group_of_label[label] < 0) continue;
      group_of_label[label] = groups.count();
      groups.label.push_back(label);
      groups.rows.emplace_back();
    }
    for (int64_t row = 0; row < n; ++row) group_of_row[row] = group_of_label[context.labels[row]];
  } else {
    // Any other label set (e.g. original values): sorted unique labels and binary search.
    groups.label = context.labels;
    std::sort(groups.label.begin(), groups.label.end());
    groups.label.erase(std::unique(groups.label.begin(), groups.label.end()), groups.label.end());
    groups.rows.resize(groups.label.size());
    for (int64_t row = 0; row < n; ++row) {
      group_of_row[row] = std::lower_bound(groups.label.begin(), groups.label.end(), context.labels[row]) -
                          groups.label.begin();
    }
  }
  std::vector<int64_t> counts(groups.rows.size(), 0);
  for (int64_t group : group_of_row) ++counts[group];
  for (std::size_t g = 0; g < counts.size(); ++g) groups.rows[g].reserve(counts[g]);
  for (int64_t row = 0; row < n; ++row) groups.rows[group_of_row[row]].push_back(row);
  return groups;
}

void LabelGroups::require_items_per_label(const data::SamplerContext& context, const std::string& sampler,
                                          int64_t min_items) const {
  for (std::size_t g = 0; g < rows.size(); ++g) {
    const auto count = static_cast<int64_t>(rows[g].size());
    OML_CHECK(count >= min_items, DataError, "sampler '", sampler, "': label ", context.label_value(label[g]),
              " has only ", count, " item", count == 1 ? "" : "s", " in ", context.source,
              ", but every label needs at least ", min_items,
              " (positive pairs need two items of a label); remove such labels from the split or use "
              "another sampler");
  }
}

CategoryGroups CategoryGroups::build(const data::SamplerContext& context, const LabelGroups& labels,
                                     const std::string& sampler) {
  OML_CHECK(!context.categories.empty(), DataError, "sampler '", sampler, "' needs a 'category' column, but ",
            context.source, " has none; add the column or use the 'balance' sampler");
  OML_CHECK(context.categories.size() == context.labels.size(), InternalError, "sampler '", sampler,
            "': ", context.categories.size(), " categories for ", context.labels.size(), " labels");
  std::map<std::string, std::vector<int64_t>> by_name;
  for (int64_t g = 0; g < labels.count(); ++g) {
    const int64_t first_row = labels.rows[g].front();
    const std::string& category = context.categories[first_row];
    OML_CHECK(!category.empty(), DataError, "sampler '", sampler, "': row ", first_row,
              " (0-based, in dataframe order) of ", context.source, " (label ",
              context.label_value(labels.label[g]), ") has an empty category");
    by_name[category].push_back(g);
  }
  CategoryGroups out;
  for (auto& [name, groups] : by_name) {
    out.name.push_back(name);
    out.label_groups.push_back(std::move(groups));
  }
  return out;
}

}  // namespace oml::samplers
