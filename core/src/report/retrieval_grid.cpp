#include "oml/report/retrieval_grid.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <unordered_map>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/image.h"

namespace oml::report {

namespace {

// BGR, as OpenCV draws.
const cv::Scalar kBackground(255, 255, 255);
const cv::Scalar kText(40, 40, 40);
const cv::Scalar kQuery(200, 110, 30);    // blue
const cv::Scalar kCorrect(40, 160, 40);   // green
const cv::Scalar kWrong(40, 40, 215);     // red
const cv::Scalar kMissedGt(0, 165, 235);  // amber: relevant, but not retrieved in the top-k

constexpr int kBorder = 4;
constexpr int kGap = 14;        // between the query, the top-k and the missed ground truth
constexpr int kRowHeader = 20;  // text line above each row
constexpr int kCaption = 18;    // text line under each cell
constexpr int kMargin = 8;
constexpr double kFontScale = 0.4;

cv::Mat load_item(const data::DataSplit& split, int64_t row, int64_t max_image_pixels) {
  const std::string& path = split.paths.at(static_cast<std::size_t>(row));
  data::ImageLimits limits;
  limits.max_pixels = max_image_pixels;
  at::Tensor image =
      data::decode_image(data::read_file_bytes(path, data::max_image_file_bytes(limits)), path, limits);
  if (split.has_bboxes() && split.bboxes[row]) image = data::crop_image(image, *split.bboxes[row], path);
  image = image.contiguous();
  cv::Mat rgb(static_cast<int>(image.size(0)), static_cast<int>(image.size(1)), CV_8UC3,
              image.data_ptr<uint8_t>());
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);  // copies, so the tensor may go
  return bgr;
}

// Draws `item` letterboxed into the cell at (x, y) with a coloured frame and a caption below.
void draw_cell(cv::Mat& canvas, int x, int y, int cell, const cv::Mat& item, const cv::Scalar& frame,
               const std::string& caption) {
  const int inner = cell - 2 * kBorder;
  const double scale =
      std::min(static_cast<double>(inner) / item.cols, static_cast<double>(inner) / item.rows);
  const int w = std::max(1, static_cast<int>(item.cols * scale));
  const int h = std::max(1, static_cast<int>(item.rows * scale));
  cv::Mat resized;
  // Upscaling tiny images (28 px Fashion-MNIST) with nearest keeps them crisp instead of blurred.
  cv::resize(item, resized, cv::Size(w, h), 0, 0, scale > 1 ? cv::INTER_NEAREST : cv::INTER_AREA);
  cv::rectangle(canvas, cv::Rect(x, y, cell, cell), frame, cv::FILLED);
  cv::rectangle(canvas, cv::Rect(x + kBorder, y + kBorder, inner, inner), kBackground, cv::FILLED);
  resized.copyTo(canvas(cv::Rect(x + kBorder + (inner - w) / 2, y + kBorder + (inner - h) / 2, w, h)));
  cv::putText(canvas, caption, cv::Point(x + 2, y + cell + kCaption - 5), cv::FONT_HERSHEY_SIMPLEX,
              kFontScale, kText, 1, cv::LINE_AA);
}

std::string format_distance(float distance) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "d=%.3f", static_cast<double>(distance));
  return buffer;
}

}  // namespace

std::vector<int64_t> worst_queries(const std::vector<double>& per_query, int64_t n) {
  std::vector<int64_t> order(per_query.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return per_query[a] < per_query[b]; });
  if (n >= 0 && static_cast<std::size_t>(n) < order.size()) order.resize(static_cast<std::size_t>(n));
  return order;
}

std::vector<int64_t> queries_with_ids(const retrieval::RetrievalResults& results,
                                      const std::vector<int64_t>& ids) {
  std::unordered_map<int64_t, int64_t> position;
  for (int64_t q = 0; q < results.num_queries(); ++q) position.emplace(results.query_ids[q], q);
  std::vector<int64_t> out;
  std::vector<std::string> missing;
  for (const int64_t id : ids) {
    const auto found = position.find(id);
    if (found == position.end()) {
      missing.push_back(std::to_string(id));
    } else {
      out.push_back(found->second);
    }
  }
  OML_CHECK(missing.empty(), DataError, "query ids ", join(missing),
            " are not queries of the validation split (", results.num_queries(),
            " queries; ids are 0-based validation rows in dataframe order)");
  return out;
}

EncodedImage draw_retrieval_grid(const retrieval::RetrievalResults& results,
                                 const std::vector<int64_t>& queries, const data::DataSplit& split,
                                 const RetrievalGridOptions& options, const std::vector<std::string>& notes) {
  OML_CHECK(split.has_paths(), DataError,
            "retrieval grids need the images: the dataframe has no 'path' column (precomputed embeddings)");
  OML_CHECK(!queries.empty(), InternalError, "draw_retrieval_grid: no queries to draw");
  OML_CHECK(options.top_k >= 1 && options.max_extra_gt >= 0 && options.cell >= 16, ConfigError,
            "retrieval grid: expected top_k >= 1, max_extra_gt >= 0 and cell >= 16, got ", options.top_k,
            ", ", options.max_extra_gt, ", ", options.cell);
  const int cell = options.cell;
  const int columns = static_cast<int>(1 + options.top_k + options.max_extra_gt);
  const int width = 2 * kMargin + columns * cell + (columns - 1) * 4 + 2 * kGap;
  const int row_height = kRowHeader + cell + kCaption + kMargin;
  cv::Mat canvas(kMargin + static_cast<int>(queries.size()) * row_height, width, CV_8UC3, kBackground);

  for (std::size_t r = 0; r < queries.size(); ++r) {
    const int64_t q = queries[r];
    OML_CHECK(q >= 0 && q < results.num_queries(), InternalError, "query position ", q, " out of range");
    const int64_t query_row = results.query_ids[q];
    const int y = kMargin + static_cast<int>(r) * row_height;
    std::string header =
        "query #" + std::to_string(query_row) + "  label " + std::to_string(results.query_labels[q]);
    if (r < notes.size() && !notes[r].empty()) header += "  " + notes[r];
    cv::putText(canvas, header, cv::Point(kMargin, y + kRowHeader - 6), cv::FONT_HERSHEY_SIMPLEX,
                kFontScale + 0.05, kText, 1, cv::LINE_AA);
    const int cells_y = y + kRowHeader;
    int x = kMargin;
    draw_cell(canvas, x, cells_y, cell, load_item(split, query_row, options.max_image_pixels), kQuery,
              "query");
    x += cell + kGap;

    const int64_t shown = std::min(options.top_k, results.size(q));
    std::vector<bool> in_top(static_cast<std::size_t>(results.num_gallery()), false);
    for (int64_t i = 0; i < shown; ++i) {
      const int64_t g = results.retrieved[results.begin(q) + i];
      in_top[g] = true;
      const bool hit = results.is_hit(q, i);
      draw_cell(canvas, x, cells_y, cell, load_item(split, results.gallery_ids[g], options.max_image_pixels),
                hit ? kCorrect : kWrong, format_distance(results.distances[results.begin(q) + i]));
      x += cell + 4;
    }
    x += (options.top_k - shown) * (cell + 4) + kGap - 4;

    // Relevant gallery items the top-k missed, in gallery order (never the query itself, nor
    // items of its sequence, which retrieval ignores too).
    const std::string* sequence =
        split.has_sequences() && !split.sequences[query_row].empty() ? &split.sequences[query_row] : nullptr;
    int64_t extra = 0;
    for (int64_t g = 0; g < results.num_gallery() && extra < options.max_extra_gt; ++g) {
      const int64_t row = results.gallery_ids[g];
      if (in_top[g] || row == query_row || results.gallery_labels[g] != results.query_labels[q]) continue;
      if (sequence != nullptr && split.sequences[row] == *sequence) continue;
      draw_cell(canvas, x, cells_y, cell, load_item(split, row, options.max_image_pixels), kMissedGt,
                "missed gt #" + std::to_string(row));
      x += cell + 4;
      ++extra;
    }
  }

  std::vector<uchar> bytes;
  // OpenCV's default PNG compression (1) makes grids 3-4x larger; they are written once and
  // embedded in report.html and the event file, so spend the extra milliseconds.
  OML_CHECK(cv::imencode(".png", canvas, bytes, {cv::IMWRITE_PNG_COMPRESSION, 9}), RuntimeError,
            "encoding a retrieval grid as PNG failed");
  EncodedImage out;
  out.png.assign(bytes.begin(), bytes.end());
  out.height = canvas.rows;
  out.width = canvas.cols;
  out.channels = 3;
  return out;
}

}  // namespace oml::report
