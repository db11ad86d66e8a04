// image-folder: src/<label name>/<images...> -> one label per sub-folder (sorted by name). With
// --val-fraction, a seeded random subset of the labels goes to validation, so that validation
// classes are never seen in training (the metric-learning protocol).
#include <algorithm>
#include <cmath>

#include "convert_common.h"
#include "oml/common/error.h"
#include "oml/data/image.h"
#include "oml/data/transform.h"

namespace oml::data::convert {

namespace {
// Output paths mirror the source: "images/<label folder>/<file>".
const std::string kImagesPrefix = "images/";

bool is_image(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto& known = image_file_extensions();
  return std::find(known.begin(), known.end(), ext) != known.end();
}
}  // namespace

ConvertReport convert_image_folder(const ConvertOptions& options) {
  OML_CHECK(options.val_fraction >= 0 && options.val_fraction < 1, UsageError,
            "--val-fraction must be in [0, 1), got ", options.val_fraction);
  std::error_code ec;
  OML_CHECK(fs::is_directory(options.src, ec), DataError, "--src ", options.src.string(), " is not a folder");
  std::vector<std::string> labels;
  for (const auto& entry : fs::directory_iterator(options.src)) {
    if (entry.is_directory()) labels.push_back(entry.path().filename().string());
  }
  std::sort(labels.begin(), labels.end());
  OML_CHECK(!labels.empty(), DataError, "--src ", options.src.string(),
            " has no sub-folders; expected one sub-folder of images per label");

  // Validation labels: a seeded shuffle of the label ids, the first round(fraction * L) of them.
  std::vector<bool> validation(labels.size(), false);
  const auto n_val =
      static_cast<std::size_t>(std::lround(options.val_fraction * static_cast<double>(labels.size())));
  OML_CHECK(options.val_fraction == 0 || (n_val >= 1 && n_val < labels.size()), UsageError, "--val-fraction ",
            options.val_fraction, " of ", labels.size(), " labels leaves ", n_val,
            " validation labels; expected at least one label in each split");
  std::vector<std::size_t> order(labels.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  KeyedRandom rng(RandomKey{options.seed, 0, 0});
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next_u64() % i]);
  for (std::size_t i = 0; i < n_val; ++i) validation[order[i]] = true;

  OutputFolder out(options);
  std::vector<Row> rows;
  std::vector<std::pair<fs::path, std::string>> files;
  for (std::size_t label = 0; label < labels.size(); ++label) {
    std::vector<fs::path> images;
    std::error_code list_ec;
    for (fs::recursive_directory_iterator it(options.src / labels[label], list_ec), end;
         !list_ec && it != end; it.increment(list_ec)) {
      std::error_code entry_ec;
      const bool regular = it->is_regular_file(entry_ec);
      OML_CHECK(!entry_ec || entry_ec == std::errc::no_such_file_or_directory, DataError, "cannot read ",
                it->path().string(), ": ", entry_ec.message());
      if (regular && is_image(it->path())) images.push_back(it->path());
    }
    OML_CHECK(!list_ec, DataError, "cannot list ", (options.src / labels[label]).string(), ": ",
              list_ec.message());
    std::sort(images.begin(), images.end());
    for (const auto& image : images) {
      Row row;
      row.label = static_cast<int64_t>(label);
      row.path =
          kImagesPrefix +
          (fs::path(labels[label]) / fs::relative(image, options.src / labels[label])).generic_string();
      row.train = !validation[label];
      row.is_query = row.is_gallery = validation[label];
      rows.push_back(row);
    }
  }
  apply_limit(rows, options.limit);
  for (const auto& row : rows)
    files.emplace_back(options.src / row.path.substr(kImagesPrefix.size()), row.path);
  out.copy_files(files);
  return out.commit(rows);
}

}  // namespace oml::data::convert
