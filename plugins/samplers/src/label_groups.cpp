#include "oml/samplers/label_groups.h"

#include <algorithm>
#include <map>

namespace oml::samplers {

LabelGroups LabelGroups::build(const data::SamplerContext& context, const std::string& sampler) {
  OML_CHECK(!context.labels.empty(), DataError, "sampler '", sampler, "': ", context.source, " has no rows to sample");
  LabelGroups groups;
  groups.label = context.labels;
  std::sort(groups.label.begin(), groups.label.end());
  groups.label.erase(std::unique(groups.label.begin(), groups.label.end()), groups.label.end());

  // Remapped labels are 0..L-1, so a direct table is the common case; other label sets (e.g.
  // a validation split with original values) fall back to binary search.
  const bool dense = groups.label.front() == 0 && groups.label.back() == groups.count() - 1;
  const auto group_of = [&](int64_t label) -> int64_t {
    if (dense) return label;
    return std::lower_bound(groups.label.begin(), groups.label.end(), label) - groups.label.begin();
  };
  std::vector<int64_t> counts(groups.label.size(), 0);
  for (int64_t label : context.labels) ++counts[group_of(label)];
  groups.rows.resize(groups.label.size());
  for (std::size_t g = 0; g < counts.size(); ++g) groups.rows[g].reserve(counts[g]);
  for (std::size_t row = 0; row < context.labels.size(); ++row) {
    groups.rows[group_of(context.labels[row])].push_back(static_cast<int64_t>(row));
  }

  return groups;
}

void LabelGroups::require_items_per_label(const data::SamplerContext& context, const std::string& sampler,
                                          int64_t min_items) const {
  for (std::size_t g = 0; g < rows.size(); ++g) {
    const auto count = static_cast<int64_t>(rows[g].size());
    OML_CHECK(count >= min_items, DataError, "sampler '", sampler, "': label ",
              context.label_value(label[g]), " has only ", count, " item", count == 1 ? "" : "s",
              " in ", context.source, ", but every label needs at least ", min_items,
              " (positive pairs need two items of a label); remove such labels from the split or use "
              "another sampler");
  }
}

CategoryGroups CategoryGroups::build(const data::SamplerContext& context, const LabelGroups& labels,
                                     const std::string& sampler) {
  OML_CHECK(!context.categories.empty(), DataError, "sampler '", sampler, "' needs a 'category' column, but ",
            context.source, " has none; add the column or use the 'balance' sampler");
  OML_CHECK(context.categories.size() == context.labels.size(), InternalError, "sampler '", sampler, "': ",
            context.categories.size(), " categories for ", context.labels.size(), " labels");
  std::map<std::string, std::vector<int64_t>> by_name;
  for (int64_t g = 0; g < labels.count(); ++g) {
    const int64_t first_row = labels.rows[g].front();
    const std::string& category = context.categories[first_row];
    OML_CHECK(!category.empty(), DataError, "sampler '", sampler, "': row ", first_row, " of ", context.source,
              " (label ", context.label_value(labels.label[g]), ") has an empty category");
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
