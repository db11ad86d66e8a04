#pragma once
// Argument checks shared by category_balance and distinct_category_balance.

#include <cstdint>
#include <string>

#include "oml/samplers/label_groups.h"

namespace oml::samplers::detail {

/// C >= 1, P > 1, K > 1 (OML's bounds): the args alone (config::ArgumentError).
inline void check_category_options(const std::string& sampler, int64_t n_categories, int64_t n_labels,
                                   int64_t n_instances) {
  if (n_categories < 1)
    fail_argument(sampler, "n_categories", "n_categories must be >= 1, got ", n_categories);
  if (n_labels <= 1) fail_argument(sampler, "n_labels", "n_labels must be > 1, got ", n_labels);
  if (n_instances <= 1) {
    fail_argument(sampler, "n_instances", "n_instances must be > 1 (a batch needs positive pairs), got ",
                  n_instances);
  }
}

/// C <= #categories, P <= L (config::ArgumentMismatch), then >= 2 items per label.
inline void check_category_fit(const std::string& sampler, const data::SamplerContext& context,
                               const LabelGroups& labels, const CategoryGroups& categories,
                               int64_t n_categories, int64_t n_labels) {
  if (n_categories > categories.count()) {
    fail_fit(sampler, "n_categories", "n_categories must satisfy 1 <= n_categories <= ", categories.count(),
             " (the number of categories in ", context.source, "), got ", n_categories);
  }
  if (n_labels > labels.count()) {
    fail_fit(sampler, "n_labels", "n_labels must satisfy 1 < n_labels <= ", labels.count(),
             " (the number of labels in ", context.source, "), got ", n_labels);
  }
  labels.require_items_per_label(context, sampler, 2);
}

/// Every category has at least n_labels labels; names the first that has not.
inline void require_labels_per_category(const std::string& sampler, const data::SamplerContext& context,
                                        const CategoryGroups& categories, int64_t n_labels,
                                        const std::string& hint) {
  for (int64_t c = 0; c < categories.count(); ++c) {
    const auto have = static_cast<int64_t>(categories.label_groups[c].size());
    if (have < n_labels) {
      fail_fit(sampler, "n_labels", "n_labels is ", n_labels, ", but category '", categories.name[c], "' of ",
               context.source, " has only ", have, " label", have == 1 ? "" : "s", hint);
    }
  }
}

}  // namespace oml::samplers::detail
