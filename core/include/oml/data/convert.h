#pragma once
// Dataset converters (`oml-convert`): public datasets in their official layouts -> the OML
// format (an `images/` folder + `df.csv`, docs/contracts.md#dataframe). Output is written next to
// `dst` and swapped in by renaming, so an existing dataset is never half-overwritten
// (docs/contracts.md#crash-safe-files).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "oml/common/progress_callback.h"

namespace oml::data {

struct ConvertOptions {
  std::filesystem::path src;     ///< the dataset as downloaded (the folder holding its index files)
  std::filesystem::path dst;     ///< output folder (replaced when it exists)
  double val_fraction = 0.0;     ///< image-folder: fraction of labels moved to validation
  uint64_t seed = 0;             ///< image-folder: which labels go to validation
  int64_t limit = -1;            ///< keep at most this many rows per split (-1 = all; for tests)
  int num_threads = 0;           ///< image encoding/copy threads (0 = hardware threads)
  ProgressCallback on_progress;  ///< images written so far (done, total), per split or batch of files
};

/// Summary of a conversion, for the command's output.
struct ConvertReport {
  int64_t train_rows = 0;
  int64_t validation_rows = 0;
  int64_t labels = 0;
  std::filesystem::path dataframe;  ///< dst / "df.csv"
};

/// The formats `convert_dataset` accepts.
const std::vector<std::string>& convert_formats();

/// Converts `format` (one of convert_formats()). Throws UsageError for an unknown format,
/// DataError naming the file and line for malformed inputs.
ConvertReport convert_dataset(const std::string& format, const ConvertOptions& options);

}  // namespace oml::data
