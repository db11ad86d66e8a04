#pragma once
// The sampler's view of the data: dataset rows grouped by label, labels grouped by category.
// Built once per sampler; every epoch only draws from these groups.

#include <cstdint>
#include <string>
#include <vector>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/data/sampler.h"

namespace oml::samplers {

/// Throws config::ArgumentError "sampler '<sampler>': <message>" about argument `key`, wrong
/// whatever the data (a sampler's check_options, run by its parse); the registry puts the
/// argument's file:line:column in front.
template <class... Args>
[[noreturn]] void fail_argument(const std::string& sampler, const std::string& key, const Args&... message) {
  config::fail_argument("sampler '" + sampler + "'", key, message...);
}

/// Throws config::ArgumentMismatch (a DataError) "sampler '<sampler>': <message>": argument
/// `key` does not fit the data the sampler is built on; placed like fail_argument.
template <class... Args>
[[noreturn]] void fail_fit(const std::string& sampler, const std::string& key, const Args&... message) {
  config::fail_fit("sampler '" + sampler + "'", key, message...);
}

/// Rows of each label. Labels are numbered by group 0..L-1 in ascending label order.
struct LabelGroups {
  std::vector<int64_t> label;              ///< label (as in SamplerContext::labels) of each group
  std::vector<std::vector<int64_t>> rows;  ///< dataset rows of each group, ascending

  int64_t count() const { return static_cast<int64_t>(rows.size()); }

  /// Groups `context.labels`. Throws DataError naming `sampler` and the source when there are no
  /// rows.
  static LabelGroups build(const data::SamplerContext& context, const std::string& sampler);

  /// Throws DataError naming `sampler`, the first label with fewer than `min_items` rows and
  /// its count.
  void require_items_per_label(const data::SamplerContext& context, const std::string& sampler,
                               int64_t min_items) const;
};

/// Labels of each category. Categories are sorted by name; a label belongs to the category of
/// its first row.
struct CategoryGroups {
  std::vector<std::string> name;                   ///< category names, sorted
  std::vector<std::vector<int64_t>> label_groups;  ///< label groups (LabelGroups index) of each category

  int64_t count() const { return static_cast<int64_t>(name.size()); }

  /// Throws DataError naming `sampler` when the context has no categories or a row's category
  /// is empty.
  static CategoryGroups build(const data::SamplerContext& context, const LabelGroups& labels,
                              const std::string& sampler);
};

}  // namespace oml::samplers
