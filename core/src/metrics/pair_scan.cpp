#include "pair_scan.h"

#include <algorithm>

namespace oml::metrics::detail {

PairScan::PairScan(const retrieval::detail::PreparedPair& pair, const retrieval::IgnoredPairs& ignored,
                   const std::vector<int64_t>& query_labels, const std::vector<int64_t>& gallery_labels)
    : pair_(pair),
      ignored_(ignored),
      query_labels_(query_labels),
      gallery_labels_(gallery_labels),
      threads_(std::max(1, at::get_num_threads())) {}

}  // namespace oml::metrics::detail
