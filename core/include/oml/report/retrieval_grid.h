#pragma once
// Pictures of retrieval results: for each chosen query one row with the query, its top-k
// gallery items framed green (right label) or red (wrong label) with their distances, and up to
// a few ground-truth items the top-k missed. Bounding boxes of the dataframe are honoured (items
// are cropped as the model saw them).
//
//   auto worst = report::worst_queries(result.per_query.at("cmc/1"), 5);
//   report::EncodedImage png = report::draw_retrieval_grid(result.retrieval, worst, split, {});

#include <cstdint>
#include <string>
#include <vector>

#include "oml/data/dataframe.h"
#include "oml/data/image.h"
#include "oml/report/run_logger.h"
#include "oml/retrieval/retrieval_results.h"

namespace oml::report {

struct RetrievalGridOptions {
  int64_t top_k = 5;         ///< retrieved items drawn per query (fewer when fewer were retrieved)
  int64_t max_extra_gt = 2;  ///< ground-truth items missing from the top-k, drawn after it
  int cell = 112;            ///< side of one image cell in pixels (images keep their aspect ratio)
  int64_t max_image_pixels = data::ImageLimits::kDefaultMaxPixels;  ///< the run's max_image_pixels
};

/// The `n` query positions (0 .. Q-1) with the lowest `per_query` values, lowest first; ties keep
/// query order, so the choice is deterministic.
std::vector<int64_t> worst_queries(const std::vector<double>& per_query, int64_t n);

/// Query positions of the rows with these dataset indices (validation rows, 0-based in dataframe
/// order). A DataError lists the ids that are not queries.
std::vector<int64_t> queries_with_ids(const retrieval::RetrievalResults& results,
                                      const std::vector<int64_t>& ids);

/// One row per entry of `queries` (query positions), in that order. `notes[i]` (optional) is
/// printed in row i's header, e.g. "cmc/1 = 0". Images come from `split` (paths required,
/// bboxes honoured); dataset ids in `results` index its rows. Throws DataError when the split
/// has no paths (precomputed embeddings without images) or an image cannot be read.
EncodedImage draw_retrieval_grid(const retrieval::RetrievalResults& results,
                                 const std::vector<int64_t>& queries, const data::DataSplit& split,
                                 const RetrievalGridOptions& options = {},
                                 const std::vector<std::string>& notes = {});

}  // namespace oml::report
